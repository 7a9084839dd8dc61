export { pipeline, statusQuery } from './pipeline.js';
