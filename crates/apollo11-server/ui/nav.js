// Routes in the URL fragment: `#/runs?state=&workflow=&all=`, `#/runs/ID?at=N`, `#/workers`, `#/schedules`.

/** The route of the fragment: `{parts: ['runs', ID], params: URLSearchParams}`. */
export function route() {
  const [path, query = ''] = location.hash.replace(/^#/, '').split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  return { parts, params: new URLSearchParams(query) };
}

/** The fragment of a route. */
export function href(parts, params = {}) {
  const query = new URLSearchParams(
    Object.entries(params).filter(([, v]) => v !== null && v !== undefined && v !== ''),
  ).toString();
  return `#/${parts.map(encodeURIComponent).join('/')}${query ? `?${query}` : ''}`;
}
