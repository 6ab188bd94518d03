// The run page: header, actions, time travel, the graph, the chosen step, the steps table
// and the timeline. Events are loaded in pages and then followed live (the event stream);
// the run is shown now (refreshed at most once a second while events arrive) or as it stood
// at the slider's event (`GET /api/v1/runs/{id}?at=N`, debounced).

import { api, follow, META, seg } from './api.js';
import { overrideStep, rerunStep, runAction, RUN_ACTIONS, signalStep } from './actions.js';
import { Dag } from './dag.js';
import { header, stepDetail } from './facts.js';
import { debounce, el, label, throttle } from './format.js';
import { href } from './nav.js';
import { withRecordedErrors } from './recorded.js';
import { Steps } from './steps.js';
import { Timeline } from './timeline.js';

const EVENTS_PAGE = 5000;
const SLIDER_MS = 150;
const LIVE_MS = 1000;

/** Mounts the page of run `id`; returns what unmounts it. */
export function mountRun(root, id, params) {
  const page = new RunPage(root, id, params.get('at'));
  page.start().catch((e) => page.fail(e));
  return () => page.stop();
}

class RunPage {
  constructor(root, id, at) {
    this.root = root;
    this.id = id;
    this.base = `/api/v1/runs/${seg(id)}`;
    this.startAt = at; // the `?at=` asked for (text), null for now
    this.events = [];
    this.index = null; // the event shown (0-based), null for now
    this.asked = 0; // requests of a past view, the last one wins
    this.abort = new AbortController();
    this.refreshLive = throttle(() => this.loadLive().catch((e) => this.warn(e)), LIVE_MS);
    this.fetchAt = debounce((index) => this.loadAt(index).catch((e) => this.warn(e)), SLIDER_MS);
  }

  async start() {
    this.live = await api(this.base);
    this.build();
    this.show(this.live);
    await this.loadEvents();
    // Events appended between the fetch of the run and of its events are in the timeline but
    // not in the run shown, and the stream brings only later ones: the run is fetched again.
    if ((this.events.at(-1)?.event_id ?? 0) > this.live.event_id) await this.loadLive();
    const at = this.events.findIndex((e) => String(e.event_id) === this.startAt);
    if (this.startAt !== null && at < 0) {
      this.notice.hidden = false;
      this.notice.textContent = `Event ${this.startAt} is not an event of this run: the run is shown now.`;
    }
    if (at >= 0 && at < this.events.length - 1) {
      this.moveTo(at);
    } else {
      this.timeline.show(this.events.length - 1);
      // The events loaded may hold errors the run object forgot: shown again only then.
      if (withRecordedErrors(this.live, this.events, this.events.length - 1) !== this.live) this.show(this.live);
    }
    const last = this.events.at(-1)?.event_id ?? 0;
    follow(`${this.base}/events/stream`, last, (e) => this.arrived(e), this.abort.signal, (problem) => this.linked(problem));
  }

  /** The event stream lost (`problem`) or back (null): said until it is back. */
  linked(problem) {
    const lost = problem !== null;
    if (!lost && !this.connection.hidden) this.refreshLive();
    this.connection.hidden = !lost;
    this.connection.textContent = lost ? `Connection to the server lost (${problem}): retrying every second…` : '';
  }

  stop() {
    this.abort.abort();
  }

  fail(e) {
    this.root.replaceChildren(el('p', { class: 'error' }, `Cannot show run ${this.id}: ${e.message}. `, el('a', { href: '#/runs' }, 'The runs.')));
  }

  /** A failed refresh: said on the page (not when the page is being left). */
  warn(e) {
    if (!this.abort.signal.aborted) this.outcome.textContent = `Could not refresh: ${e.message}`;
  }

  build() {
    const section = (name, ...children) => el('section', { class: name }, ...children);
    this.head = section('head');
    this.actions = section('actions');
    this.outcome = el('p', { class: 'outcome', 'data-outcome': true });
    this.connection = el('p', { class: 'banner lost', 'data-connection': true, role: 'alert', hidden: true });
    this.notice = el('p', { class: 'banner lost', 'data-notice': true, hidden: true });
    this.slider = el('input', { type: 'range', min: 1, max: 1, value: 1, disabled: true, 'aria-label': 'time travel: the event shown',
      oninput: () => this.moveTo(Number(this.slider.value) - 1) });
    this.when = el('span', { class: 'when', 'data-when': true }, 'Loading the events…');
    const now = el('button', { onclick: () => this.moveTo(this.events.length - 1) }, 'Now');
    const graph = el('div', { class: 'graph' });
    const dagParts = { graph, toggles: el('div', { class: 'buttons groups', 'data-groups': true }), summary: el('p', { class: 'muted' }) };
    this.detail = el('div');
    const steps = section('steps-section', el('h2', {}, 'Steps'));
    const timeline = section('timeline', el('h2', {}, 'Timeline'));
    this.root.append(this.connection, this.notice, this.head, this.actions, this.outcome,
      section('travel', el('h2', {}, 'Time travel'), el('div', { class: 'travel-row' }, this.slider, now), this.when),
      section('dag-section', el('h2', {}, 'Graph'), dagParts.summary, legend(), dagParts.toggles, graph),
      this.detail, steps, timeline);
    this.dag = new Dag(dagParts, this.live, (name) => this.select(name));
    this.steps = new Steps(steps, (name, withLog) => this.select(name, withLog), (name) => this.override(name));
    this.timeline = new Timeline(timeline, this.events, (index) => this.moveTo(index));
  }

  /** Shows `view` (now or past) everywhere; the actions always follow the run now. */
  show(shown) {
    const now = shown === this.live;
    const view = withRecordedErrors(shown, this.events, this.index ?? this.events.length - 1);
    this.shown = view;
    this.head.replaceChildren(...header(view, now));
    this.dag.update(view);
    this.steps.update(view, this.live.allowed.override);
    this.renderDetail();
    this.renderActions();
  }

  renderActions() {
    const buttons = Object.entries(RUN_ACTIONS).map(([name, { button }]) =>
      el('button', { disabled: !this.live.allowed[name], title: this.live.refused[name] ?? null, 'data-action': name,
        onclick: () => this.act(runAction(this.id, name)) }, button));
    const note = Object.entries(this.live.refused).map(([name, why]) => `${name}: ${why}`).join(' · ');
    this.actions.replaceChildren(el('div', { class: 'buttons' }, buttons), note ? el('p', { class: 'muted' }, `Not now — ${note}`) : null);
  }

  select(name, withLog = false) {
    this.selected = name;
    this.dag.select(name);
    this.steps.show(name);
    this.renderDetail(withLog);
  }

  renderDetail(withLog = false) {
    const step = this.selected && this.shown.steps[this.selected];
    if (!step) return this.detail.replaceChildren();
    this.detail.replaceChildren(stepDetail(this.selected, step,
      { withLog, overridable: this.live.allowed.override, onOverride: (name) => this.override(name),
        onRerun: (name, downstream) => this.act(rerunStep(this.id, name, downstream)),
        onSignal: (name) => this.act(signalStep(this.id, name)) }));
  }

  override(name) {
    this.act(overrideStep(this.id, name, this.live.steps[name]?.overrides));
  }

  /** Waits for an action's answer, says which event it appended, shows the run now. */
  async act(answer) {
    const result = await answer;
    if (!result) return;
    this.outcome.textContent = result.event_id === null
      ? 'No operator\'s pause to lift: the server drove the run again.'
      : `Appended event #${result.event_id}.`;
    this.outcome.dataset.eventId = result.event_id ?? '';
    await this.loadLive();
  }

  async loadLive() {
    this.live = await api(this.base, { signal: this.abort.signal });
    if (this.index === null) this.show(this.live);
    else this.renderActions();
  }

  async loadEvents() {
    for (let after = 0; after !== null;) {
      const page = await api(`${this.base}/events?after=${after}&limit=${EVENTS_PAGE}`, { signal: this.abort.signal });
      this.events.push(...page.events);
      this.when.textContent = `Loading the events… ${this.events.length} of ${this.live.events}`;
      after = page.next_after;
    }
    this.slider.disabled = false;
    this.sliderTo(this.events.length - 1);
  }

  /** An event from the stream: added; the run now refreshed (throttled). */
  arrived(event) {
    if (event.event_id <= (this.events.at(-1)?.event_id ?? 0)) return;
    const before = this.events.length;
    this.events.push(event);
    if (this.index === null) {
      // At "Now": the timeline follows to its last page.
      this.sliderTo(this.events.length - 1);
      this.timeline.show(this.events.length - 1);
    } else {
      this.slider.max = this.events.length;
      this.timeline.grew(before);
    }
    this.refreshLive();
  }

  sliderTo(index) {
    this.slider.max = Math.max(this.events.length, 1);
    this.slider.value = index + 1;
    this.when.textContent = this.describe(index);
  }

  describe(index) {
    const event = this.events[index];
    if (!event) return 'No events.';
    const what = `${label(event.kind)}${event.step ? ` ${event.step}` : ''}`;
    const at = `event ${index + 1} of ${this.events.length} (#${event.event_id}, ${what})`;
    return index === this.events.length - 1 ? `Now: ${at}` : `As it stood after ${at}. Actions act on the run now.`;
  }

  /** Moves time to event `index`: the last is now, any other is fetched (debounced). */
  moveTo(index) {
    const live = index >= this.events.length - 1;
    this.index = live ? null : index;
    this.sliderTo(index);
    this.timeline.show(index);
    history.replaceState(null, '', href(['runs', this.id], { at: live ? null : this.events[index].event_id }));
    this.root.classList.toggle('past', !live);
    if (live) {
      this.asked++;
      this.show(this.live);
      this.refreshLive();
    } else {
      this.fetchAt(index);
    }
  }

  async loadAt(index) {
    const asked = ++this.asked;
    const view = await api(`${this.base}?at=${this.events[index].event_id}`, { signal: this.abort.signal });
    if (asked === this.asked && this.index === index) this.show(view);
  }
}

function legend() {
  return el('p', { class: 'legend' }, META.step_states.map((s) => el('span', { class: `badge st-${s}` }, label(s))));
}
