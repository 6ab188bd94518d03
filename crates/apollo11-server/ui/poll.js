// A page's data polled while the tab is shown: the runs list, the workers.

import { ApiError } from './api.js';
import { time } from './format.js';

/**
 * Calls `load()` now, then every `ms` while the tab is visible; `status` says when the last
 * call succeeded, or why it failed (until one succeeds). Returns `{now, stop}`: `now()`
 * loads again at once (a page's button), `stop()` ends the polling.
 */
export function poll(load, status, ms) {
  const once = async () => {
    try {
      await load();
      status.textContent = `Updated ${time(Date.now())}, every ${ms / 1000} s while this tab is shown.`;
    } catch (e) {
      status.textContent = e instanceof ApiError ? `The server said: ${e.message}` : `Cannot reach the server: ${e.message}`;
    }
  };
  once();
  const timer = setInterval(() => document.visibilityState === 'visible' && once(), ms);
  return { now: once, stop: () => clearInterval(timer) };
}
