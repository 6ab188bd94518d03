// What a step's tries used (the run view's `usage`): the last try's figures and a sparkline
// of its attempts' peak memory (CPU time where no peak is known), for the steps table.

import { duration, el } from './format.js';

const SVG = 'http://www.w3.org/2000/svg';
const WIDTH = 60;
const HEIGHT = 16;

/** `bytes` as `412 MiB`, or `—`. */
export function bytes(n) {
  if (n === null || n === undefined) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${n} B` : `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

/** What a try used in words (a step's `usage` item, or an `attempt_usage` event). */
export function usageWords(u) {
  const cpu = u.cpu_user_ms === null ? '' : `, cpu ${duration(u.cpu_user_ms)} user + ${duration(u.cpu_system_ms)} system`;
  const peak = u.peak_memory_bytes === null ? '' : `, peak ${bytes(u.peak_memory_bytes)}`;
  const limit = u.memory_limit_bytes === null ? '' : `, limit ${bytes(u.memory_limit_bytes)}`;
  return `wall ${duration(u.wall_ms)}${cpu}${peak} (${u.isolation}${limit})`;
}

/** One try's usage in words, with its attempt, for a tooltip. */
function tryWords(u) {
  return `${u.compensation ? 'compensation' : 'attempt'} ${u.attempt}: ${usageWords(u)}`;
}

/** A sparkline of `values` (at least two), the highest at the top. */
function sparkline(values, title) {
  const top = Math.max(...values) || 1;
  const x = (i) => (i / (values.length - 1)) * (WIDTH - 2) + 1;
  const y = (v) => HEIGHT - 1 - (v / top) * (HEIGHT - 2);
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('width', WIDTH);
  svg.setAttribute('height', HEIGHT);
  svg.setAttribute('class', 'spark');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', title);
  const line = document.createElementNS(SVG, 'polyline');
  line.setAttribute('points', values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(' '));
  svg.append(line);
  return svg;
}

/** The cell of a step's usage: its last try's peak memory and CPU time, and over its attempts a sparkline. */
export function usageCell(usage) {
  if (!usage || usage.length === 0) return el('td', { class: 'num muted' }, '—');
  const last = usage[usage.length - 1];
  const cpu = last.cpu_user_ms === null ? null : last.cpu_user_ms + last.cpu_system_ms;
  const text = [last.peak_memory_bytes === null ? null : bytes(last.peak_memory_bytes), cpu === null ? null : `${duration(cpu)} cpu`]
    .filter((t) => t !== null).join(' · ') || duration(last.wall_ms);
  const attempts = usage.filter((u) => !u.compensation);
  const memory = attempts.every((u) => u.peak_memory_bytes !== null);
  const values = attempts.map((u) => (memory ? u.peak_memory_bytes : (u.cpu_user_ms ?? 0) + (u.cpu_system_ms ?? 0)));
  const spark = values.length > 1 ? sparkline(values, memory ? 'peak memory by attempt' : 'cpu time by attempt') : null;
  return el('td', { class: 'num usage', title: usage.map(tryWords).join('\n') }, text, spark);
}
