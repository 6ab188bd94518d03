// The backfill dialog of a schedule: a range of UTC instants and a parallelism; "Preview"
// asks the server what would start (`dry_run`), "Start …" (enabled by a preview of the same
// fields) starts it, and the dialog says what started.

import { api } from './api.js';
import { el, utc } from './format.js';
import { href } from './nav.js';

/** The run ids a preview or a start lists. */
const IDS_SHOWN = 5;
/** The range the dialog opens with: the last hour. */
const DEFAULT_SPAN_MS = 3_600_000;

/** Opens the dialog for schedule `s` (an item of `GET /api/v1/schedules`). */
export function backfillDialog(s) {
  const dialog = document.getElementById('backfill-dialog');
  const form = dialog.querySelector('form');
  form.reset();
  dialog.querySelector('[data-title]').textContent = `Backfill ${s.workflow} / ${s.name}`;
  const to = Math.floor(Date.now() / 1000) * 1000;
  form.elements.from.value = utc(to - DEFAULT_SPAN_MS);
  form.elements.to.value = utc(to);
  const error = dialog.querySelector('[data-error]');
  const result = dialog.querySelector('[data-result]');
  const start = dialog.querySelector('[data-backfill-start]');
  const preview = dialog.querySelector('[data-preview]');
  let previewed = null; // the request a preview answered, which Start sends
  const reset = () => {
    previewed = null;
    start.disabled = true;
    start.textContent = 'Start backfill';
  };
  const say = (text, answer = null) => {
    error.textContent = '';
    result.replaceChildren(text, answer ? ids(answer) : '');
  };
  reset();
  say('Preview first: it says how many runs would start.');
  const send = async (dryRun) => {
    const asked = dryRun ? request(form, s) : previewed;
    if (asked.error) {
      error.textContent = asked.error;
      return;
    }
    preview.disabled = start.disabled = true;
    error.textContent = 'Sending…';
    try {
      const answer = await api('/api/v1/schedules/backfill', { method: 'POST', body: { ...asked, dry_run: dryRun } });
      if (dryRun) {
        previewed = asked;
        say(`${answer.fires} fire times in the range, ${answer.existing} with a run already: ${answer.starting_count} runs would start.`, answer);
        start.textContent = `Start backfill: ${answer.starting_count} runs`;
        start.disabled = answer.starting_count === 0;
      } else {
        say(`Started ${answer.starting_count} runs, at most ${asked.max_parallel} at once.`, answer);
        reset();
      }
    } catch (e) {
      error.textContent = `Refused: ${e.message}`;
      start.disabled = !previewed;
    } finally {
      preview.disabled = false;
    }
  };
  const submit = (e) => {
    e.preventDefault();
    if (e.submitter?.value === 'cancel') return dialog.close();
    send(e.submitter?.value === 'preview');
  };
  form.addEventListener('submit', submit);
  form.addEventListener('input', reset);
  dialog.addEventListener('close', () => {
    form.removeEventListener('submit', submit);
    form.removeEventListener('input', reset);
  }, { once: true });
  dialog.showModal();
}

/** The request of the form's fields, or `{error}` naming the field that is wrong. */
function request(form, s) {
  const asked = { workflow: s.workflow, schedule: s.name, yes: true };
  for (const name of ['from', 'to']) {
    const text = form.elements[name].value.trim();
    const ms = /(Z|[+-]\d\d:\d\d)$/.test(text) ? Date.parse(text) : NaN;
    if (Number.isNaN(ms) || ms < 0) return { error: `${name}: not a UTC instant like 2026-12-06T03:00:00Z` };
    asked[name] = ms;
  }
  const parallel = Number(form.elements.max_parallel.value);
  if (!Number.isInteger(parallel) || parallel < 1 || parallel > 1000) return { error: 'max parallel: a whole number from 1 to 1000' };
  asked.max_parallel = parallel;
  return asked;
}

/** The first run ids of an answer, each a link. */
function ids(answer) {
  const shown = answer.starting.slice(0, IDS_SHOWN);
  const more = answer.starting_count - shown.length;
  return el('ul', { 'data-ids': true },
    shown.map((id) => el('li', {}, el('a', { href: href(['runs', id]) }, id))),
    more > 0 ? el('li', { class: 'muted' }, `and ${more} more`) : null);
}
