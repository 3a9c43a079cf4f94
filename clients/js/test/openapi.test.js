import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { createConfig, lint } from '@redocly/openapi-core';

const contract = fileURLToPath(new URL('../../../api/openapi.yaml', import.meta.url));

test('api/openapi.yaml is a valid OpenAPI 3.1 document (Redocly recommended rules)', async () => {
  const config = await createConfig({
    extends: ['recommended'],
    rules: {
      'info-license': 'off', // the repository's licence is not the API's
      'operation-4xx-response': 'off', // /healthz and /v1/openapi.json cannot fail on input
      'no-unused-components': 'off', // EventData documents the event stream's data lines
    },
  });
  const problems = await lint({ ref: contract, config });
  const lines = problems.map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`);
  assert.deepEqual(lines, []);
});
