// What the run object forgets and the events keep: why a step's retries stopped (its last
// `failed` event's note), and a step's last error once an operator overrode the step after
// it (to skipped, say). The page goes on showing that error, with the override as what
// happened after.

/**
 * `view` (the run as it stood after event `upto`, an index into `events`) with, for each step
 * whose last failure (no try started since) recorded why its retries stopped: that note
 * (`error_stopped`); and for each such step an override followed whose error the view no
 * longer has: that failure's `error`, class and try (`error_try`), and the override
 * (`error_then`).
 */
export function withRecordedErrors(view, events, upto) {
  let steps = null;
  for (const [name, seen] of lastFailures(events, upto)) {
    const step = view.steps[name];
    const recorded = step && recordedError(step, seen);
    if (!recorded) continue;
    steps ??= { ...view.steps };
    steps[name] = { ...step, ...recorded };
  }
  return steps ? { ...view, steps } : view;
}

/** What the events add to `step` about its last `failure` and an `override` after it, or null. */
function recordedError(step, { failure, override }) {
  const added = {};
  if (failure.note) added.error_stopped = failure.note;
  if (override && (step.error ?? null) === null) {
    Object.assign(added, {
      error: failure.error,
      error_class: failure.class ?? null,
      error_try: failure.attempt,
      error_then: `then overridden to ${override.to} by ${override.by}: ${override.reason}`,
    });
  }
  return Object.keys(added).length ? added : null;
}

/** Step → `{failure, override}`: its last failure up to `upto`, an override after it (or null). */
function lastFailures(events, upto) {
  const last = new Map();
  for (let i = 0; i <= upto && i < events.length; i++) {
    const event = events[i];
    if (!event.step) continue;
    if (event.kind === 'failed' || event.kind === 'compensation_failed') last.set(event.step, { failure: event, override: null });
    else if (event.kind === 'manual_override' && last.has(event.step)) last.get(event.step).override = event;
    else if (event.kind === 'started' || event.kind === 'compensating') last.delete(event.step);
  }
  return last;
}
