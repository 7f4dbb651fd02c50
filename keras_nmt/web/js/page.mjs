// The page of a web export: text in, translation out, each sentence's alignment as the
// paper's Fig. 3 (a heat map) and each word coloured by the model's confidence (drawn by
// keras-nmt serve's figures.mjs, copied beside this page), all
// computed in this page by translator.mjs on onnxruntime-web's WebAssembly build.
// Text is always set with textContent, never parsed as HTML. window.kerasNmt gives
// scripts (and the tests) the loaded translator.

import { element, heatMap, legend, showWords } from './figures.mjs';
import { TranslatorError, confidenceFields, loadTranslator } from './translator.mjs';

const $ = (id) => document.getElementById(id);
// A pasted book must not freeze the tab: at most this much text at once, and only the
// first heat maps are drawn (a table cell per weight).
const MAX_CHARS = 20000;
const MAX_HEATMAPS = 8;
const MAX_HEATMAP_CELLS = 20000;
// The smallest module that uses a SIMD instruction (v128.const, i8x16.popcnt):
// WebAssembly.validate says whether this browser runs SIMD, which the runtime needs.
const SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3,
  2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11]);

function setStatus(text, isError = false) {
  $('status').textContent = text;
  $('status').classList.toggle('error', isError);
}

/** Why this browser cannot run the model, or null when it can. */
function missingFeature() {
  if (typeof WebAssembly !== 'object') return 'This browser has no WebAssembly: the model cannot run here.';
  if (!WebAssembly.validate(SIMD_PROBE)) {
    return 'This browser has no WebAssembly SIMD, which the model\'s runtime needs: use a current Chromium, Firefox or Safari.';
  }
  return null;
}

/** A file of the folder, its progress counted in bytes while it streams in. */
function reader(progress) {
  return async (path) => {
    const response = await fetch(new URL(path, import.meta.url));
    if (!response.ok) throw new TranslatorError(`${path}: ${response.status} ${response.statusText}`);
    const total = Number(response.headers.get('Content-Length')) || 0;
    const chunks = [];
    let received = 0;
    const stream = response.body.getReader();
    for (;;) {
      const { done, value } = await stream.read();
      if (done) break;
      chunks.push(value);
      received += value.length;
      if (total > 1e6) progress(path, received / total);
    }
    const bytes = new Uint8Array(received);
    let at = 0;
    for (const chunk of chunks) { bytes.set(chunk, at); at += chunk.length; }
    return bytes;
  };
}

function render(sources, translations, limit) {
  const results = $('results');
  results.replaceChildren();
  const drawn = { maps: 0, cells: 0, skipped: 0 };
  if (translations.some((t) => t.confidence)) results.append(legend());
  translations.forEach((t, k) => {
    const box = element('div', 'sentence');
    box.append(element('p', 'source', sources[k]));
    const best = element('p', 'best');
    const fields = confidenceFields(t);
    showWords(best, t.text, fields.words);
    box.append(best);
    if (fields.confidence !== null) {
      box.append(element('p', 'confidence', `Confidence ${fields.confidence.toFixed(3)}`));
    }
    const cut = (t.sentences.length ? t.sentences : [t]).reduce((sum, s) => sum + s.truncated, 0);
    if (cut) {
      box.append(element('p', 'note error', `${cut} word${cut > 1 ? 's' : ''} beyond the model's `
        + `limit of ${limit} per sentence ${cut > 1 ? 'were' : 'was'} not translated.`));
    }
    for (const sentence of t.sentences.length ? t.sentences : [t]) {
      if (!sentence.attention) continue;
      const cells = sentence.attention.rows * sentence.attention.columns;
      if (drawn.maps >= MAX_HEATMAPS || drawn.cells + cells > MAX_HEATMAP_CELLS) {
        drawn.skipped += 1;
        continue;
      }
      drawn.maps += 1;
      drawn.cells += cells;
      const { data, columns } = sentence.attention;
      box.append(heatMap(sentence.sourceTokens, sentence.tokens, (i, j) => data[i * columns + j]));
    }
    results.append(box);
  });
  if (drawn.skipped) {
    results.append(element('p', 'note', `${drawn.skipped} more alignments are not drawn.`));
  }
}

async function translate(translator, event) {
  event.preventDefault();
  const text = $('text').value;
  const sources = text.split('\n').filter((line) => line.trim());
  if (!sources.length) {
    setStatus('Nothing to translate: type or paste some text.');
    return;
  }
  if (text.length > MAX_CHARS) {
    setStatus(`The text holds ${text.length} characters; this page translates at most ${MAX_CHARS} at once.`, true);
    return;
  }
  const options = {
    beam: Number($('beam').value),
    attention: translator.attends,
    confidence: translator.scoresTokens,
  };
  setStatus('translating…');
  $('translate').disabled = true;
  const started = performance.now();
  try {
    const translations = await translator.translate(sources, options);
    render(sources, translations, translator.metadata.max_source_len);
    setStatus(`${sources.length} line${sources.length > 1 ? 's' : ''} in ${Math.round(performance.now() - started)} ms`);
  } catch (error) {
    setStatus(error instanceof TranslatorError ? error.message : `error: ${error.message || error}`, true);
  } finally {
    $('translate').disabled = false;
  }
}

async function registerWorker() {
  if (!('serviceWorker' in navigator) || !window.isSecureContext) return 'no service worker (the page is not served from http://localhost or https)';
  try {
    await navigator.serviceWorker.register(new URL('sw.js', import.meta.url));
    return navigator.serviceWorker.controller ? 'cached for offline use' : 'being cached for offline use';
  } catch (error) {
    return `no offline copy (${error.message})`;
  }
}

async function start() {
  const missing = missingFeature();
  if (missing) {
    $('loading').replaceChildren(element('p', 'error', missing));
    return;
  }
  const offline = await registerWorker();
  const ort = await import('./ort/ort.wasm.min.mjs');
  // Threads need a cross-origin isolated page; ?threads=N asks for fewer.
  const most = self.crossOriginIsolated ? Math.min(4, navigator.hardwareConcurrency || 1) : 1;
  const asked = Number(new URLSearchParams(location.search).get('threads'));
  const threads = Number.isInteger(asked) && asked >= 1 ? Math.min(asked, most) : most;
  ort.env.wasm.numThreads = threads;
  ort.env.wasm.wasmPaths = new URL('ort/', import.meta.url).href;
  const started = performance.now();
  const translator = await loadTranslator({
    ort,
    read: reader((path, share) => { $('progress').value = share; $('progress-label').textContent = `Loading ${path}…`; }),
    onProgress: (step, done, total) => {
      if (step === 'ready') return;
      $('progress-label').textContent = `Loading the ${step}…`;
      if (step !== 'model') $('progress').value = done / total;
    },
  });
  const loadMs = Math.round(performance.now() - started);
  $('loading').hidden = true;
  $('languages').textContent = `${translator.src} → ${translator.tgt}`;
  $('beam').value = String(translator.metadata.beam_size);  // the export's
  $('runtime').textContent = `onnxruntime-web, WebAssembly SIMD, ${threads} thread${threads > 1 ? 's' : ''}`
    + (self.crossOriginIsolated ? ' (cross-origin isolated)' : ' (the page is not cross-origin isolated: one thread)')
    + `; ${translator.metadata.int8 ? 'int8' : 'float'} model loaded in ${loadMs} ms; ${offline}.`;
  $('form').addEventListener('submit', (event) => translate(translator, event));
  $('translate').disabled = false;
  window.kerasNmt = { translator, threads, loadMs, readyMs: performance.now() };
}

start().catch((error) => {
  $('loading').replaceChildren(element('p', 'error', `The model could not be loaded: ${error.message || error}`));
  window.kerasNmt = { error: String(error.message || error) };
});
