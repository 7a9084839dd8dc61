/**
 * What the OpenAI handlers of `aerie-sim vllm` share: a request body, the error they answer with,
 * and the check of the model a request names.
 */
import type { VllmServer } from './context.js';

export type Body = Record<string, unknown>;

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: string,
    readonly param: string | null = null,
  ) {
    super(message);
  }
}

export function bodyOf(x: unknown): Body {
  return x && typeof x === 'object' && !Array.isArray(x) ? (x as Body) : {};
}

export function checkModel(srv: VllmServer, body: Body): void {
  // entrypoints/openai/models/serving.py:58: a request for a model the server does not serve is a 404.
  if (body.model === undefined || body.model === null) return;
  if (!srv.servedNames.includes(String(body.model)))
    throw new ApiError(404, `The model \`${String(body.model)}\` does not exist.`, 'NotFoundError', 'model');
}
