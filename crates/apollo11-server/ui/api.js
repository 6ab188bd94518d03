// The HTTP API of `apollo11 serve`: JSON calls and the event stream, with the bearer token
// asked for on the first 401 and kept in sessionStorage.

const TOKEN_KEY = 'apollo11.token';

/**
 * An error answer of the API: its status, the message of its error object, and the
 * parameter of a start it is about (`param`, or null).
 */
export class ApiError extends Error {
  constructor(status, message, param = null) {
    super(message);
    this.status = status;
    this.param = param;
  }
}

let asking = null;

/** Asks for the token once, however many calls were refused at the same time. */
function askToken(problem) {
  asking ??= new Promise((resolve) => {
    const dialog = document.getElementById('token-dialog');
    dialog.querySelector('[data-error]').textContent = problem;
    dialog.addEventListener('close', () => {
      const token = dialog.querySelector('input').value.trim();
      sessionStorage.setItem(TOKEN_KEY, token);
      asking = null;
      resolve();
    }, { once: true });
    dialog.showModal();
  });
  return asking;
}

function headers(extra = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

/** `fetch` with the token; a 401 asks for the token and tries again. */
async function call(path, init = {}) {
  for (;;) {
    const response = await fetch(path, { ...init, headers: headers(init.headers) });
    if (response.status !== 401) return response;
    await askToken((await problem(response)).message);
  }
}

/** The error object of an answer: `{message, param}`. */
async function problem(response) {
  const text = await response.text();
  try {
    const { message, param = null } = JSON.parse(text).error;
    if (typeof message !== 'string') throw new TypeError('no message');
    return { message, param };
  } catch {
    return { message: `${response.status} ${response.statusText}: ${text.slice(0, 200)}`, param: null };
  }
}

async function checked(response) {
  if (!response.ok) {
    const { message, param } = await problem(response);
    throw new ApiError(response.status, message, param);
  }
  return response;
}

/** GET (or `method` with a JSON `body`) → the answer's JSON; an error answer throws. */
export async function api(path, { method = 'GET', body, signal } = {}) {
  const init = { method, signal };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = { 'Content-Type': 'application/json' };
  }
  return (await checked(await call(path, init))).json();
}

/**
 * What the server says of itself (`GET /api/v1/meta`): its limits and the names of run
 * states, step states and override targets. Filled by `loadMeta` before a page shows.
 */
export const META = {};

/** Reads the server's `meta` into `META`. */
export async function loadMeta() {
  Object.assign(META, await api('/api/v1/meta'));
}

/** GET of a step's log → `{text, bytes}`: its end as served, and its whole size. */
export async function log(path, { signal } = {}) {
  const response = await checked(await call(path, { signal }));
  return { text: await response.text(), bytes: Number(response.headers.get('X-Log-Bytes')) };
}

/**
 * Follows `path` (an event stream) with the token, calling `onEvent(object)` per message;
 * reconnects from the last id it saw (`?after=`) until `signal` aborts. `onLink(problem)`
 * says when the stream is lost (`problem`, a message) and when it is back (null).
 */
export async function follow(path, after, onEvent, signal, onLink) {
  while (!signal.aborted) {
    let problem = 'the server ended the stream';
    try {
      const response = await checked(await call(`${path}?after=${after}`, { signal }));
      onLink(null);
      after = await readStream(response.body, onEvent, after);
    } catch (e) {
      if (signal.aborted) return;
      problem = e.message;
    }
    if (signal.aborted) return;
    onLink(problem);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

/** Reads server-sent events until the stream ends; returns the last id seen. */
async function readStream(body, onEvent, after) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return after;
    buffer += value;
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const message = parse(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      if (message.data === undefined) continue;
      after = message.id ?? after;
      onEvent(JSON.parse(message.data));
    }
  }
}

/** One message's fields (`id`, `event`, `data`); comment lines are dropped. */
function parse(block) {
  const message = {};
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    message[field] = field === 'data' && message.data !== undefined ? `${message.data}\n${value}` : value;
  }
  return message;
}

/** A path segment, percent-encoded. */
export function seg(name) {
  return encodeURIComponent(name);
}
