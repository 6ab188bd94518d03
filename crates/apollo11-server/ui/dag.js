// The run's graph as SVG, layered by topological depth: one column per depth (a deep layer
// wraps into several columns), drawn once per run; moving through time only changes each
// node's class and label. Past EDGES_MAX edges only the selected step's edges are drawn.

import { duration, esc, label } from './format.js';

const W = 176;
const H = 34;
const GAP_X = 44;
const GAP_Y = 8;
const ROWS_MAX = 40;
const NAME_CHARS = 22;
/** Past this many edges, only the selected step's are drawn. */
export const EDGES_MAX = 800;

/** Where each step sits: `{at: Map(name → {x, y}), width, height, layers, edges}`. */
export function layout(view) {
  const depth = new Map();
  const layers = [];
  for (const name of view.order) {
    const deps = view.steps[name].depends_on;
    const d = deps.length ? 1 + Math.max(...deps.map((dep) => depth.get(dep))) : 0;
    depth.set(name, d);
    (layers[d] ??= []).push(name);
  }
  const at = new Map();
  let column = 0;
  let rowsMax = 0;
  for (const layer of layers) {
    const columns = Math.ceil(layer.length / ROWS_MAX);
    const rows = Math.ceil(layer.length / columns);
    layer.forEach((name, i) => {
      at.set(name, { x: (column + Math.floor(i / rows)) * (W + GAP_X) + 8, y: (i % rows) * (H + GAP_Y) + 8 });
    });
    column += columns;
    rowsMax = Math.max(rowsMax, rows);
  }
  const edges = view.order.flatMap((name) => view.steps[name].depends_on.map((dep) => [dep, name]));
  return { at, edges, layers: layers.length, width: column * (W + GAP_X) + 16, height: rowsMax * (H + GAP_Y) + 16 };
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

function nodeMarkup(name, { x, y }) {
  const short = shortName(name);
  return `<g class="node" data-step="${esc(name)}" transform="translate(${x},${y})"><title></title>`
    + `<rect width="${W}" height="${H}" rx="4"/><text x="6" y="14" class="name">${esc(short)}</text>`
    + `<text x="6" y="28" class="meta"></text></g>`;
}

/** The graph of `view` drawn into `host`; `onSelect(name)` on a click on a step. */
export class Dag {
  constructor(host, view, onSelect) {
    this.plan = layout(view);
    const { at, edges, width, height } = this.plan;
    const all = edges.length <= EDGES_MAX ? edges.map(([a, b]) => edgePath(at.get(a), at.get(b))).join('') : '';
    host.innerHTML = `<svg class="dag" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}"`
      + ` role="img" aria-label="the run's graph"><g class="edges">${all}</g><g class="focus"></g>`
      + `${[...at].map(([name, pos]) => nodeMarkup(name, pos)).join('')}</svg>`;
    this.svg = host.firstElementChild;
    this.nodes = new Map([...this.svg.querySelectorAll('g.node')].map((g) => [g.dataset.step, g]));
    this.svg.addEventListener('click', (e) => {
      const node = e.target.closest('g.node');
      if (node) onSelect(node.dataset.step);
    });
    this.selected = null;
  }

  /** What the drawing says of its size, for the page. */
  summary() {
    const { at, edges, layers } = this.plan;
    const drawn = edges.length <= EDGES_MAX ? 'every edge drawn' : 'the selected step\'s edges drawn';
    return `${at.size} steps in ${layers} layers, ${edges.length} edges (${drawn})`;
  }

  /** Each node's state (colour and text), attempt and duration as in `view`. */
  update(view) {
    for (const [name, g] of this.nodes) {
      const step = view.steps[name];
      const parts = [label(step.state), `try ${step.attempt}`];
      if (step.duration_ms !== null) parts.push(duration(step.duration_ms));
      g.setAttribute('class', `node st-${step.state}${name === this.selected ? ' selected' : ''}`);
      g.lastElementChild.textContent = parts.join(' · ');
      g.firstElementChild.textContent = `${name}: ${parts.join(', ')}${step.error ? `\n${step.error}` : ''}`;
    }
  }

  /** Marks `name` selected and draws its edges in front; scrolls it into view. */
  select(name) {
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
