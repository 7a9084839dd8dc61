/** The generate stage: regenerate the training conversations' assistant turns with the target. */
export { runGenerate } from './regenerate.js';
