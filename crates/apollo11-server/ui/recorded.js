// What the run object forgets and the events keep: a step's last error once an operator
// overrode the step after it (to skipped, say). The page goes on showing that error, with the
// override as what happened after.

/**
 * `view` (the run as it stood after event `upto`, an index into `events`) with, for each step
 * whose last failure an override followed (no try started since) and whose error the view
 * no longer has: that failure's `error` and try (`error_try`), and the override
 * (`error_then`).
 */
export function withRecordedErrors(view, events, upto) {
  const overridden = overriddenFailures(events, upto);
  let steps = null;
  for (const [name, { failure, override }] of overridden) {
    const step = view.steps[name];
    if (!step || (step.error ?? null) !== null) continue;
    steps ??= { ...view.steps };
    steps[name] = {
      ...step,
      error: failure.error,
      error_try: failure.attempt,
      error_then: `then overridden to ${override.to} by ${override.by}: ${override.reason}`,
    };
  }
  return steps ? { ...view, steps } : view;
}

/** Step → `{failure, override}`: its last failure up to `upto`, an override after it. */
function overriddenFailures(events, upto) {
  const last = new Map();
  for (let i = 0; i <= upto && i < events.length; i++) {
    const event = events[i];
    if (!event.step) continue;
    if (event.kind === 'failed' || event.kind === 'compensation_failed') last.set(event.step, { failure: event, override: null });
    else if (event.kind === 'manual_override' && last.has(event.step)) last.get(event.step).override = event;
    else if (event.kind === 'started' || event.kind === 'compensating') last.delete(event.step);
  }
  return [...last].filter(([, seen]) => seen.override);
}
