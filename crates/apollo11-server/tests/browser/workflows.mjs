// Writes the browser test's workflows into a folder for `apollo11 serve --workflows`: the
// committed ones (workflows/) and `thousand`, generated: 1,000 steps in 20 layers of 50, each
// step after two of the layer before; each fails its first two tries (every third step its
// third too: the same failure each time, so `same_failure_max = 0` lets it be retried) and
// succeeds after, so that a run has about 10,000 events; and `quoted`, whose
// step says a parameter and checks it has a secret, read from the file `quoted/secret` (an
// absolute path: a secret's file is found from the server's folder, not the workflow's).
//
//   node workflows.mjs OUT_DIR

import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SECRET } from './common.mjs';

const LAYERS = 20;
const WIDTH = 50;

/** The TOML of the 1,000-step workflow. */
export function thousand() {
  const name = (layer, i) => `l${String(layer).padStart(2, '0')}-s${String(i).padStart(2, '0')}`;
  // A try counter next to the step's log: the first FAILS tries fail.
  const run = (fails) =>
    `n="$(dirname "$APOLLO11_OUTPUT")/tries"; t=$(($(cat "$n" 2>/dev/null || echo 0) + 1)); echo $t > "$n"; [ $t -gt ${fails} ]`;
  const lines = [
    '[workflow]',
    'name = "thousand"',
    'max_concurrency = 16',
    '',
    '[defaults]',
    'timeout = "1m"',
    'retry = { max_attempts = 4, backoff = "fixed", initial = "1ms", same_failure_max = 0 }',
  ];
  for (let layer = 0; layer < LAYERS; layer++) {
    for (let i = 0; i < WIDTH; i++) {
      lines.push('', '[[steps]]', `name = "${name(layer, i)}"`, `run = '${run(i % 3 === 0 ? 3 : 2)}'`);
      lines.push('idempotency = "natural"');
      if (layer > 0) {
        const deps = new Set([i, (i * 7 + layer) % WIDTH].map((j) => `"${name(layer - 1, j)}"`));
        lines.push(`depends_on = [${[...deps].join(', ')}]`);
      }
    }
  }
  return lines.join('\n') + '\n';
}

/** The TOML of `quoted`, its secret read from the file `secretFile`. */
export function quoted(secretFile) {
  return `[workflow]
name = "quoted"

[defaults]
timeout = "1m"
retry = { max_attempts = 1 }

[params]
word = { type = "string", required = true, description = "what the step says, one word to the shell" }
token = { type = "string", secret = { file = ${JSON.stringify(secretFile)} }, description = "a credential the step checks it has" }

[[steps]]
name = "say"
run = "echo \${params.word} && [ -n \${params.token} ]"
idempotency = "natural"
`;
}

function main() {
  const out = process.argv[2];
  if (!out || process.argv.length > 3) {
    console.error('usage: node workflows.mjs OUT_DIR');
    process.exit(2);
  }
  const here = dirname(fileURLToPath(import.meta.url));
  cpSync(join(here, 'workflows'), out, { recursive: true });
  mkdirSync(join(out, 'thousand'), { recursive: true });
  writeFileSync(join(out, 'thousand', 'workflow.toml'), thousand());
  const secret = resolve(out, 'quoted', 'secret');
  mkdirSync(dirname(secret), { recursive: true });
  writeFileSync(secret, `${SECRET}\n`, { mode: 0o600 });
  writeFileSync(join(out, 'quoted', 'workflow.toml'), quoted(secret));
}

main();
