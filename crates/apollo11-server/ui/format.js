// Formatting and DOM helpers shared by the pages.

/** An element: `el('td', {class: 'x', title: 't'}, 'text', child)`. Text is never HTML. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : value);
  }
  node.append(...children.flat().filter((c) => c !== null && c !== undefined));
  return node;
}

/** `text` escaped for HTML and SVG markup. */
export function esc(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * The command a try ran, from its `placed` event's payload (a shell step's records
 * `{"command", "cwd"}`), or null when the payload holds none.
 */
export function ranCommand(payload) {
  return typeof payload?.command === 'string' ? payload.command : null;
}

const pad = (n, width = 2) => String(n).padStart(width, '0');

/** A time (ms since the epoch) as local `YYYY-MM-DD HH:MM:SS`, or `—`. */
export function time(ms) {
  if (ms === null || ms === undefined) return '—';
  const d = new Date(ms);
  const day = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  return `${day} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A time (ms since the epoch) as RFC 3339 in UTC, whole seconds: `2026-12-06T03:00:00Z`. */
export function utc(ms) {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** A duration in ms as `812 ms`, `3.2 s`, `4 min 05 s` or `2 h 03 min`, or `—`. */
export function duration(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.floor(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${pad(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${pad(Math.floor(s / 60) % 60)} min`;
}

/** A state's label: `rolled_back` → `rolled back`. */
export function label(state) {
  return String(state).replaceAll('_', ' ');
}

/** A state badge: its colour from the class, its text the state's label. */
export function badge(state) {
  return el('span', { class: `badge st-${state}` }, label(state));
}

/** How long a run or step took: finished → its span, still running → until now. */
export function span(from, to, running) {
  if (from === null || from === undefined) return null;
  return (running ? Date.now() : to) - from;
}

/** `fn` called with the last arguments once calls have stopped for `ms`. */
export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

/** `fn` called at once, then at most once per `ms` while calls keep coming. */
export function throttle(fn, ms) {
  let last = 0;
  let timer = null;
  return () => {
    const wait = last + ms - Date.now();
    if (timer) return;
    if (wait <= 0) {
      last = Date.now();
      fn();
      return;
    }
    timer = setTimeout(() => {
      timer = null;
      last = Date.now();
      fn();
    }, wait);
  };
}
