/**
 * The run's search attributes as typed keys, made from the one list in shared.ts (which the
 * dev server registers and connect checks). The workflow upserts AerieStage as it moves on;
 * the client sets all three at start, and `aerie status` reads AerieStage when no worker answers.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { SEARCH_ATTRIBUTES } from '../shared.js';

const TYPE = { Keyword: SearchAttributeType.KEYWORD } as const;

function key<N extends keyof typeof SEARCH_ATTRIBUTES>(name: N) {
  return defineSearchAttributeKey(name, TYPE[SEARCH_ATTRIBUTES[name]]);
}

/** The stage the run is in (or last entered). */
export const AerieStage = key('AerieStage');
/** The target model's folder name. */
export const AerieTarget = key('AerieTarget');
/** run.label, for filtering a researcher's runs in the Web UI. */
export const AerieLabel = key('AerieLabel');
