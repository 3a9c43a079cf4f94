import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const dir = fileURLToPath(new URL('..', import.meta.url));

test('types.d.ts is what openapi-typescript makes of api/openapi.yaml (npm run gen)', () => {
  // --check exits non-zero, naming the file, when the generated types differ.
  assert.doesNotThrow(() => execFileSync('npm', ['run', '--silent', 'check-types'], { cwd: dir, stdio: 'pipe' }));
});
