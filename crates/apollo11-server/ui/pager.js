// Page buttons for a list shown a page at a time.

import { el } from './format.js';

/** First / previous / `page x of y` / next / last buttons; `go(page)` on a click. */
export function pageButtons(page, pages, go) {
  const button = (text, to, name) => el('button', { disabled: to === page || to < 0 || to >= pages, onclick: () => go(to), 'data-page': name }, text);
  return el('div', { class: 'pager' },
    button('⇤', 0, 'first'), button('←', page - 1, 'previous'),
    el('span', { class: 'muted' }, `page ${page + 1} of ${Math.max(pages, 1)}`),
    button('→', page + 1, 'next'), button('⇥', pages - 1, 'last'));
}
