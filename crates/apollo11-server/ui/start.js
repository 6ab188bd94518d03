// The start dialog: a registered workflow picked, a form made from its parameters (an input
// by type, defaults filled in, descriptions, required ones marked, secrets not asked for but
// said where the server reads them), values checked here as far as they can be, then the
// start sent; the server's refusal is shown beside the parameter it names. A start opens
// the run's page.

import { api, ApiError } from './api.js';
import { el } from './format.js';
import { secretSource } from './facts.js';
import { href } from './nav.js';

/** The input of a parameter of `type`, holding `value` (its default, or none). */
function input(param) {
  const value = param.default;
  const name = `param-${param.name}`;
  switch (param.type) {
    case 'boolean':
      return el('input', { type: 'checkbox', name, checked: value === true });
    case 'integer':
    case 'number':
      return el('input', { type: 'number', name, step: param.type === 'integer' ? '1' : 'any', value: value ?? null });
    case 'list':
    case 'object': {
      const area = el('textarea', { name, rows: 3, spellcheck: 'false', placeholder: param.type === 'list' ? '["a", "b"]' : '{"key": "value"}' });
      area.value = value === null ? '' : JSON.stringify(value);
      return area;
    }
    default:
      return el('input', { name, autocomplete: 'off', value: value ?? null });
  }
}

/** The field of one parameter: label, input, description, and where its error goes. */
function field(param) {
  const mark = param.required ? el('span', { class: 'required', title: 'required' }, ' *') : null;
  const kind = el('span', { class: 'muted' }, ` (${param.type})`);
  if (param.secret) {
    return el('div', { class: 'param secret', 'data-param-field': param.name },
      el('span', {}, param.name, kind),
      el('p', { class: 'muted', 'data-secret-note': true }, `A secret: not asked for here. The server reads it ${secretSource(param)} at each try.`));
  }
  const box = input(param);
  const parts = param.type === 'boolean' ? [box, ` ${param.name}`, mark, kind] : [param.name, mark, kind, box];
  return el('div', { class: 'param', 'data-param-field': param.name },
    el('label', {}, ...parts),
    param.description ? el('p', { class: 'muted' }, param.description) : null,
    el('p', { class: 'error', 'data-param-error': param.name, role: 'alert' }));
}

/** `text` read as JSON of `type` (`list` or `object`); throws what is wrong. */
function json(text, type) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new Error(`not JSON: ${e.message}`);
  }
  const fits = type === 'list' ? Array.isArray(value) : value !== null && typeof value === 'object' && !Array.isArray(value);
  if (!fits) throw new Error(`must be a JSON ${type === 'list' ? 'list ([...])' : 'object ({...})'}`);
  return value;
}

/**
 * The value of `param`'s input: `undefined` when left empty (the default, if any, applies);
 * throws what is wrong with it.
 */
function read(param, box) {
  if (param.type === 'boolean') return box.checked;
  const text = box.value.trim();
  if (text === '') {
    if (param.required) throw new Error('required');
    return undefined;
  }
  switch (param.type) {
    case 'integer':
    case 'number': {
      const value = Number(text);
      if (!Number.isFinite(value)) throw new Error(`must be a number, not ${JSON.stringify(text)}`);
      if (param.type === 'integer' && !Number.isInteger(value)) throw new Error(`must be an integer, not ${text}`);
      return value;
    }
    case 'list':
    case 'object':
      return json(text, param.type);
    default:
      return box.value;
  }
}

/**
 * The values of the form (`{params}`), or null when one is wrong: each wrong one said beside
 * its field.
 */
function values(form, params) {
  const given = {};
  let wrong = false;
  for (const param of params.filter((p) => !p.secret)) {
    const error = form.querySelector(`[data-param-error="${CSS.escape(param.name)}"]`);
    try {
      const value = read(param, form.elements[`param-${param.name}`]);
      if (value !== undefined) given[param.name] = value;
      error.textContent = '';
    } catch (e) {
      error.textContent = e.message;
      wrong = true;
    }
  }
  return wrong ? null : given;
}

/** Opens the start dialog on `workflow` (the first registered when not given). */
export async function startDialog(workflow) {
  const dialog = document.getElementById('start-dialog');
  const form = dialog.querySelector('form');
  const error = dialog.querySelector('[data-error]');
  const fields = dialog.querySelector('[data-param-fields]');
  const select = form.elements.workflow;
  const ok = dialog.querySelector('[data-submit]');
  form.reset();
  error.textContent = 'Loading the workflows…';
  let registered = [];
  try {
    registered = (await api('/api/v1/workflows')).workflows;
    error.textContent = registered.length ? '' : 'This server has no registered workflow (apollo11 serve --workflows).';
  } catch (e) {
    error.textContent = `The workflows did not load: ${e.message}`;
  }
  select.replaceChildren(...registered.map((w) => el('option', { value: w.name, selected: w.name === workflow }, w.name)));
  const chosen = () => registered.find((w) => w.name === select.value);
  const build = () => {
    const w = chosen();
    dialog.querySelector('[data-workflow-file]').textContent = w ? `${w.file}: ${w.steps.length} steps as declared` : '';
    fields.replaceChildren(el('legend', {}, 'Parameters'),
      ...(w?.params.length ? w.params.map(field) : [el('p', { class: 'muted' }, 'This workflow declares no parameter.')]));
  };
  select.onchange = build;
  build();
  ok.disabled = registered.length === 0;
  const submit = async (e) => {
    e.preventDefault();
    if (e.submitter?.value === 'cancel') return dialog.close();
    const w = chosen();
    if (ok.disabled || !w) return;
    const params = values(form, w.params);
    if (!params) {
      error.textContent = 'Some values are wrong: see beside them.';
      return;
    }
    const body = { workflow: w.name, digest: w.digest, params };
    const runId = form.elements.run_id.value.trim();
    if (runId) body.run_id = runId;
    error.textContent = 'Starting…';
    ok.disabled = true;
    try {
      const started = await api('/api/v1/runs', { method: 'POST', body });
      dialog.close();
      location.hash = href(['runs', started.run_id]);
    } catch (err) {
      refused(form, error, err);
    } finally {
      ok.disabled = false;
    }
  };
  form.onsubmit = submit;
  dialog.showModal();
}

/** The server's refusal: beside the parameter it names, else under the form. */
function refused(form, error, err) {
  const beside = err instanceof ApiError && err.param !== null
    && form.querySelector(`[data-param-error="${CSS.escape(err.param)}"]`);
  if (beside) {
    beside.textContent = err.message;
    error.textContent = `Refused: see ${err.param}.`;
  } else {
    error.textContent = `Refused: ${err.message}`;
  }
}
