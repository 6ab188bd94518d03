// The run's events, a page of PAGE rows at a time (never all 10,000 in the DOM): when, what,
// which step, who and why. The event the run is shown at is marked; a click on a row moves
// time there.

import { rerunWords } from './actions.js';
import { el, label, ranCommand, time } from './format.js';
import { pageButtons } from './pager.js';
import { usageWords } from './usage.js';

const PAGE = 100;

/** Who wrote an event: the operator named in it, else the engine instance. */
export function who(event) {
  return event.by ?? `engine ${event.instance}`;
}

/** `[class] ` before a failure's text, or nothing for a failure with no class. */
export function classPrefix(failureClass) {
  return failureClass ? `[${failureClass}] ` : '';
}

/** Why, or what the event says beyond its kind. */
export function why(event) {
  if (event.steps !== undefined) return `${event.reason}; ${rerunWords(event)}`;
  if (event.reason !== undefined) return event.to ? `to ${event.to}: ${event.reason}` : event.reason;
  if (event.error !== undefined) {
    const stopped = event.note ? ` — stopped: ${event.note}` : '';
    return `${classPrefix(event.class)}${event.error}${event.retryable ? '' : ' (not retryable)'}${stopped}`;
  }
  if (event.workflow !== undefined) return `workflow ${event.workflow}`;
  if (event.host !== undefined) return placeWords(event.host, event.handle);
  if (event.items !== undefined) return `into ${event.items} item${event.items === 1 ? '' : 's'}`;
  if (event.wall_ms !== undefined) return usageWords(event);
  return '';
}

/** The command a placed try ran, as text in a code element, or null. */
function ran(event) {
  const command = event.kind === 'placed' ? ranCommand(event.payload) : null;
  return command === null ? null : el('code', { class: 'command', 'data-command': true }, command);
}

/**
 * Where a try was placed, in words: a shell step's process group (`{"pgid", "boot",
 * "start"}`) as `pid 10268 on HOST (boot 8c1f2a3b)`; a try on a worker (`{"worker",
 * "token", "group"}`) as `worker w1 (host HOST): pid 10268 (boot 8c1f2a3b)`; any other
 * handle as it is.
 */
export function placeWords(host, handle) {
  let place = null;
  try {
    place = JSON.parse(handle);
  } catch {
    // Another step executor's handle: shown as it is.
  }
  if (typeof place?.worker === 'string') {
    const group = isGroup(place.group) ? `: pid ${place.group.pgid} (boot ${boot(place.group)})` : '';
    return `worker ${place.worker} (host ${host})${group}`;
  }
  if (isGroup(place)) return `pid ${place.pgid} on ${host} (boot ${boot(place)})`;
  return `on ${host}: ${handle}`;
}

const isGroup = (group) => Number.isInteger(group?.pgid) && typeof group.boot === 'string';
/** The first 8 characters of the kernel's boot id: enough to tell two boots apart. */
const boot = (group) => group.boot.slice(0, 8);

/** The timeline of `events` (an array that grows); `onPick(index)` on a click on a row. */
export class Timeline {
  constructor(host, events, onPick) {
    this.events = events;
    this.onPick = onPick;
    this.page = 0;
    this.current = -1;
    this.body = el('tbody');
    this.pager = el('div');
    host.append(el('div', { class: 'scroll' }, el('table', { class: 'events' }, el('thead', {}, el('tr', {},
      ['#', 'Event', 'Time', 'Step', 'Kind', 'Try', 'Who', 'Why / what'].map((h) => el('th', {}, h)))), this.body)), this.pager);
  }

  /** Marks event `index` (0-based) and shows its page. */
  show(index) {
    this.current = index;
    this.page = Math.floor(index / PAGE);
    this.render();
  }

  /** After events were added (there were `before`): re-renders the page if they show on it. */
  grew(before) {
    if ((this.page + 1) * PAGE > before) this.render();
    else this.pager.replaceChildren(this.buttons());
  }

  pages() {
    return Math.ceil(this.events.length / PAGE);
  }

  render() {
    const start = this.page * PAGE;
    this.body.replaceChildren(...this.events.slice(start, start + PAGE).map((e, i) => this.row(e, start + i)));
    this.pager.replaceChildren(this.buttons());
  }

  buttons() {
    return pageButtons(this.page, this.pages(), (page) => { this.page = page; this.render(); });
  }

  row(event, index) {
    const operator = event.by !== undefined;
    return el('tr', { class: [index === this.current ? 'current' : '', operator ? 'operator' : ''].join(' ').trim() || null,
      'data-event': event.event_id, onclick: () => this.onPick(index) },
    el('td', { class: 'num' }, String(event.seq)),
    el('td', { class: 'num' }, `#${event.event_id}`),
    el('td', {}, time(event.at_ms)),
    el('td', {}, event.step ?? '(run)'),
    el('td', {}, el('span', { class: `kind k-${event.kind}` }, label(event.kind))),
    el('td', { class: 'num' }, event.attempt ? String(event.attempt) : ''),
    el('td', {}, who(event)),
    el('td', { class: 'why' }, why(event), ran(event)));
  }
}
