// The run's graph as SVG, layered by topological depth: one column per depth (a deep layer
// wraps into several columns), drawn once per run and again when a group opens or closes;
// moving through time only changes each node's class and label. The steps a `for_each`
// made are one group node per declaration (collapsed at first), its counts by state on it;
// a click opens it. Past EDGES_MAX edges only the selected step's edges are drawn.

import { duration, el, esc, label } from './format.js';

const W = 176;
const H = 34;
const GAP_X = 44;
const GAP_Y = 8;
const ROWS_MAX = 40;
const NAME_CHARS = 22;
/** Past this many edges, only the selected step's are drawn. */
export const EDGES_MAX = 800;
/** A group's colour: the first of these states one of its steps is in, else pending. */
const GROUP_STATES = ['anomalous', 'compensation_failed', 'failed', 'compensating', 'running', 'pending', 'compensated', 'succeeded', 'skipped'];

/** The `for_each` declaration → the steps it made, in order. */
export function groups(view) {
  const made = new Map();
  for (const name of view.order) {
    const origin = view.steps[name].origin;
    if (origin) (made.get(origin.declaration) ?? made.set(origin.declaration, []).get(origin.declaration)).push(name);
  }
  return made;
}

/**
 * Where each node sits: `{at: Map(node → {x, y}), width, height, layers, edges, members}`.
 * A node is a step, or `group:DECL` for the steps of a declaration in `collapsed`, at the
 * depth of its shallowest step; edges join nodes, each once.
 */
export function layout(view, collapsed = new Set(), made = groups(view)) {
  const node = new Map();
  const members = new Map();
  for (const [decl, names] of made) {
    if (!collapsed.has(decl)) continue;
    members.set(`group:${decl}`, names);
    for (const name of names) node.set(name, `group:${decl}`);
  }
  const of = (name) => node.get(name) ?? name;
  const depth = new Map();
  const nodeDepth = new Map();
  for (const name of view.order) {
    const deps = view.steps[name].depends_on;
    const d = deps.length ? 1 + Math.max(...deps.map((dep) => depth.get(dep))) : 0;
    depth.set(name, d);
    const key = of(name);
    nodeDepth.set(key, Math.min(nodeDepth.get(key) ?? d, d));
  }
  const byDepth = [];
  for (const [key, d] of nodeDepth) (byDepth[d] ??= []).push(key);
  const layers = byDepth.filter(Boolean);
  const at = new Map();
  let column = 0;
  let rowsMax = 0;
  for (const layer of layers) {
    const columns = Math.ceil(layer.length / ROWS_MAX);
    const rows = Math.ceil(layer.length / columns);
    layer.forEach((key, i) => {
      at.set(key, { x: (column + Math.floor(i / rows)) * (W + GAP_X) + 8, y: (i % rows) * (H + GAP_Y) + 8 });
    });
    column += columns;
    rowsMax = Math.max(rowsMax, rows);
  }
  const joined = new Set();
  const edges = [];
  for (const name of view.order) {
    for (const dep of view.steps[name].depends_on) {
      const edge = [of(dep), of(name)];
      const id = edge.join('\u0000');
      if (edge[0] === edge[1] || joined.has(id)) continue;
      joined.add(id);
      edges.push(edge);
    }
  }
  return { at, edges, members, layers: layers.length, width: column * (W + GAP_X) + 16, height: rowsMax * (H + GAP_Y) + 16 };
}

function edgePath(from, to) {
  const [x1, y1, x2, y2] = [from.x + W, from.y + H / 2, to.x, to.y + H / 2];
  const mid = (x1 + x2) / 2;
  return `<path d="M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}"/>`;
}

/** `name` cut to NAME_CHARS characters as seen (grapheme clusters: an emoji stays whole). */
function shortName(name) {
  const chars = Array.from(new Intl.Segmenter().segment(name), (part) => part.segment);
  return chars.length > NAME_CHARS ? `${chars.slice(0, NAME_CHARS - 1).join('')}…` : name;
}

function nodeMarkup(key, { x, y }, members) {
  const group = members.get(key);
  const [data, text] = group
    ? [`data-group="${esc(key.slice('group:'.length))}"`, shortName(`${key.slice('group:'.length)}[…] ×${group.length}`)]
    : [`data-step="${esc(key)}"`, shortName(key)];
  return `<g class="node${group ? ' group' : ''}" ${data} transform="translate(${x},${y})"><title></title>`
    + `<rect width="${W}" height="${H}" rx="4"/><text x="6" y="14" class="name">${esc(text)}</text>`
    + `<text x="6" y="28" class="meta"></text></g>`;
}

/** `{state: count}` of `names` in `view`, and the state that colours them as one. */
export function counts(view, names) {
  const by = {};
  for (const name of names) by[view.steps[name].state] = (by[view.steps[name].state] ?? 0) + 1;
  return { by, state: GROUP_STATES.find((s) => by[s]) ?? 'pending' };
}

/** `{state: count}` in words: `2 succeeded · 1 skipped`. */
export function countsText(by) {
  return Object.entries(by).map(([state, n]) => `${n} ${label(state)}`).join(' · ');
}

/** What a step's rule and condition say, in words (empty for the default rule and none). */
export function whenText(step) {
  const parts = [];
  if (step.trigger && step.trigger !== 'all_succeeded') parts.push(`trigger ${step.trigger}`);
  if (step.condition) parts.push(`when ${step.condition}`);
  return parts.join(', ');
}

/**
 * The graph of `view` drawn into `graph`, a button per group in `toggles`, what it shows
 * said in `summary`; `onSelect(name)` on a click on a step.
 */
export class Dag {
  constructor({ graph: host, toggles, summary }, view, onSelect) {
    this.host = host;
    this.toggles = toggles;
    this.summaryText = summary;
    this.view = view;
    this.made = groups(view);
    this.collapsed = new Set(this.made.keys());
    this.selected = null;
    host.addEventListener('click', (e) => {
      const node = e.target.closest('g.node');
      if (node?.dataset.group !== undefined) this.toggle(node.dataset.group);
      else if (node) onSelect(node.dataset.step);
    });
    this.draw();
  }

  draw() {
    this.plan = layout(this.view, this.collapsed, this.made);
    const { at, edges, width, height, members } = this.plan;
    const all = edges.length <= EDGES_MAX ? edges.map(([a, b]) => edgePath(at.get(a), at.get(b))).join('') : '';
    this.host.innerHTML = `<svg class="dag" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}"`
      + ` role="img" aria-label="the run's graph"><g class="edges">${all}</g><g class="focus"></g>`
      + `${[...at].map(([key, pos]) => nodeMarkup(key, pos, members)).join('')}</svg>`;
    this.svg = this.host.firstElementChild;
    this.nodes = new Map([...this.svg.querySelectorAll('g.node[data-step]')].map((g) => [g.dataset.step, g]));
    this.groupNodes = new Map([...this.svg.querySelectorAll('g.node[data-group]')].map((g) => [g.dataset.group, g]));
    this.summaryText.textContent = this.summary();
  }

  /** Opens or closes the group of declaration `decl`. */
  toggle(decl) {
    if (this.collapsed.has(decl)) this.collapsed.delete(decl);
    else this.collapsed.add(decl);
    this.draw();
    this.update(this.view);
    if (this.nodes.has(this.selected)) this.select(this.selected);
  }

  /** What the drawing says of its size, for the page. */
  summary() {
    const { at, edges, layers } = this.plan;
    const drawn = edges.length <= EDGES_MAX ? 'every edge drawn' : 'the selected step\'s edges drawn';
    const steps = this.view.order.length;
    const grouped = this.made.size ? `, ${this.made.size} for_each ${this.made.size === 1 ? 'group' : 'groups'}` : '';
    return `${steps} steps (${at.size} nodes${grouped}) in ${layers} layers, ${edges.length} edges (${drawn})`;
  }

  /** Each node's state (colour and text), attempt and duration as in `view`. */
  update(view) {
    this.view = view;
    for (const [name, g] of this.nodes) {
      const step = view.steps[name];
      const parts = [label(step.state), `try ${step.attempt}`];
      if (step.duration_ms !== null) parts.push(duration(step.duration_ms));
      g.setAttribute('class', `node st-${step.state}${name === this.selected ? ' selected' : ''}`);
      g.lastElementChild.textContent = parts.join(' · ');
      const notes = [whenText(step), step.skip_reason ? `skipped: ${step.skip_reason}` : '', step.error ?? ''];
      g.firstElementChild.textContent = [`${name}: ${parts.join(', ')}`, ...notes.filter(Boolean)].join('\n');
    }
    for (const [decl, g] of this.groupNodes) {
      const names = this.made.get(decl);
      const { by, state } = counts(view, names);
      g.setAttribute('class', `node group st-${state}`);
      g.lastElementChild.textContent = countsText(by);
      g.firstElementChild.textContent = `${decl}: ${names.length} steps of its for_each (${countsText(by)}); click to open`;
    }
    this.renderToggles(view);
  }

  /** One button per group: open or close it, with its counts. */
  renderToggles(view) {
    this.toggles.replaceChildren(...[...this.made].map(([decl, names]) => {
      const open = !this.collapsed.has(decl);
      return el('button', { 'data-group-toggle': decl, 'aria-expanded': String(open), onclick: () => this.toggle(decl) },
        `${open ? '▾' : '▸'} ${decl}: ${names.length} steps (${countsText(counts(view, names).by)})`);
    }));
  }

  /** Marks `name` selected (opening its group) and draws its edges in front; scrolls it into view. */
  select(name) {
    const decl = this.view.steps[name]?.origin?.declaration;
    if (decl !== undefined && this.collapsed.has(decl)) this.toggle(decl);
    this.nodes.get(this.selected)?.classList.remove('selected');
    this.selected = name;
    const node = this.nodes.get(name);
    const focus = this.svg.querySelector('g.focus');
    if (!node) return focus.replaceChildren();
    node.classList.add('selected');
    const { at, edges } = this.plan;
    focus.innerHTML = edges.filter(([a, b]) => a === name || b === name)
      .map(([a, b]) => edgePath(at.get(a), at.get(b))).join('');
    node.scrollIntoView?.({ block: 'nearest', inline: 'nearest' });
  }
}
