import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { generate } from '../scripts/gen-types.js';

test('types.d.ts is what the OpenAPI document gives (npm run gen)', () => {
  const doc = JSON.parse(readFileSync(new URL('../../../httpapi/openapi.json', import.meta.url), 'utf8'));
  assert.equal(readFileSync(new URL('../types.d.ts', import.meta.url), 'utf8'), generate(doc));
});
