// The single page: routes in the URL fragment (`#/runs?state=&workflow=`, `#/runs/ID?at=N`,
// `#/workers`, `#/schedules`), each page mounted into <main> and unmounted (its polling and streams stopped) on leaving.

import { mountRuns } from './runs.js';
import { mountRun } from './run.js';
import { mountWorkers } from './workers.js';
import { mountSchedules } from './schedules.js';
import { el } from './format.js';
import { loadMeta } from './api.js';
import { route } from './nav.js';

let unmount = () => {};

function show() {
  unmount();
  const root = document.getElementById('app');
  root.replaceChildren();
  root.className = '';
  const { parts, params } = route();
  const where = document.getElementById('where');
  for (const link of document.querySelectorAll('nav.pages a')) {
    link.classList.toggle('here', link.dataset.page === (parts[0] ?? 'runs'));
  }
  if (parts[0] === 'runs' && parts.length === 2) {
    where.textContent = `run ${parts[1]}`;
    unmount = mountRun(root, parts[1], params);
  } else if (parts[0] === 'workers' && parts.length === 1) {
    where.textContent = 'workers';
    unmount = mountWorkers(root);
  } else if (parts[0] === 'schedules' && parts.length === 1) {
    where.textContent = 'schedules';
    unmount = mountSchedules(root);
  } else if (parts.length === 0 || (parts[0] === 'runs' && parts.length === 1)) {
    where.textContent = 'runs';
    unmount = mountRuns(root, params);
  } else {
    where.textContent = '';
    root.append(el('p', { class: 'error' }, `No page at ${location.hash}. `, el('a', { href: '#/runs' }, 'The runs.')));
    unmount = () => {};
  }
}

window.addEventListener('hashchange', show);
loadMeta().then(show, (e) => {
  document.getElementById('app').replaceChildren(el('p', { class: 'error' }, `The server's limits and names did not load: ${e.message}`));
});
