#!/usr/bin/env node
// Translate stdin with a web export in Node.js, as `keras-nmt onnx-translate` does:
//
//   node FOLDER/cli.mjs [--beam K] [--nbest N] [--confidence] < in.txt > out.txt
//
// One output line per input line, in order: the translation, or with --nbest the Moses
// format (INDEX ||| text ||| score), or with --confidence a JSON object. Input is read a
// chunk of 64 batches at a time and each chunk written before the next is read, as
// onnx-translate reads it, so the two batch alike. It runs the folder's own
// onnxruntime-web files: nothing outside the folder is read.

import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';

import { TranslatorError, confidenceFields, fixed, loadTranslator } from './translator.mjs';

const CHUNK_BATCHES = 64;
const PROG = 'cli.mjs';
const USAGE = `usage: node ${PROG} [--beam K] [--nbest N] [--alpha A] [--no-unk] [--confidence]
       [--batch-size B] [--threads 1] [--no-split-sentences] [--full-vocabulary | --shortlist F,B]
       [--quiet] < input.txt`;

const OPTIONS = {
  beam: { type: 'string' }, nbest: { type: 'string' }, alpha: { type: 'string' },
  'no-unk': { type: 'boolean' }, confidence: { type: 'boolean' },
  'batch-size': { type: 'string' }, threads: { type: 'string' },
  'no-split-sentences': { type: 'boolean' }, 'full-vocabulary': { type: 'boolean' },
  shortlist: { type: 'string' }, quiet: { type: 'boolean' }, help: { type: 'boolean' },
};

function positive(name, text) {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!/^\d+$/u.test(text) || value < 1) throw new TranslatorError(`--${name}: expected a positive integer, got '${text}'`);
  return value;
}

function options(values) {
  if (values.shortlist !== undefined && values['full-vocabulary']) {
    throw new TranslatorError('--shortlist and --full-vocabulary exclude each other');
  }
  let shortlist = values['full-vocabulary'] ? false : true;
  if (values.shortlist !== undefined) {
    const sizes = values.shortlist.split(',');
    if (sizes.length !== 2) throw new TranslatorError(`--shortlist: expected F,B, got '${values.shortlist}'`);
    shortlist = sizes.map((size) => (size === '0' ? 0 : positive('shortlist', size)));
  }
  const alpha = values.alpha === undefined ? undefined : Number(values.alpha);
  if (alpha !== undefined && !(alpha >= 0)) throw new TranslatorError(`--alpha: expected a number >= 0, got '${values.alpha}'`);
  return {
    beam: positive('beam', values.beam), nbest: positive('nbest', values.nbest), alpha,
    forbidUnk: Boolean(values['no-unk']), confidence: Boolean(values.confidence),
    batchSize: positive('batch-size', values['batch-size']) ?? 32,
    splitSentences: values['no-split-sentences'] ? false : undefined, shortlist,
  };
}

/** stdin's lines as the Python readers split them: on "\n", the line end (LF or CRLF)
 * dropped, a final newline starting no line; a line that is not UTF-8 stops it, named. */
async function* stdinLines() {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let number = 0;
  const decoded = (bytes) => {
    number += 1;
    try {
      return decoder.decode(bytes).replace(/[\r\n]+$/u, '');
    } catch {
      throw new TranslatorError(`input: line ${number} is not UTF-8 text`);
    }
  };
  let pending = new Uint8Array(0);
  for await (const chunk of process.stdin) {
    const bytes = new Uint8Array(pending.length + chunk.length);
    bytes.set(pending);
    bytes.set(chunk, pending.length);
    let start = 0;
    for (let end = bytes.indexOf(10); end >= 0; end = bytes.indexOf(10, start)) {
      yield decoded(bytes.subarray(start, end));
      start = end + 1;
    }
    pending = bytes.slice(start);
  }
  if (pending.length) yield decoded(pending);
}

function record(index, translation, settings) {
  if (settings.nbest) {
    const hypotheses = translation.alternatives.length ? translation.alternatives : [translation];
    return hypotheses.map((h) => `${index} ||| ${h.text} ||| ${fixed(h.score, 4)}\n`).join('');
  }
  if (settings.confidence) {
    return `${JSON.stringify({ index, text: translation.text, ...confidenceFields(translation) })}\n`;
  }
  return `${translation.text}\n`;
}

async function main() {
  const { values } = parseArgs({ options: OPTIONS, allowPositionals: false });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const settings = options(values);
  const ort = await import('./ort/ort.wasm.min.mjs');
  if ((positive('threads', values.threads) ?? 1) > 1) {
    throw new TranslatorError('--threads: in Node.js the folder\'s WebAssembly build runs on one '
      + 'thread (its threads are a browser\'s workers)');
  }
  ort.env.wasm.numThreads = 1;
  ort.env.logLevel = 'error';
  const translator = await loadTranslator({
    ort, read: async (path) => new Uint8Array(await readFile(new URL(path, import.meta.url))),
  });
  translator.settings(settings);  // a bad option stops before stdin is read
  const started = performance.now();
  let index = 0;
  let chunk = [];
  const flush = async () => {
    const translations = await translator.translate(chunk, settings);
    process.stdout.write(translations.map((t, k) => record(index + k, t, values)).join(''));
    index += chunk.length;
    chunk = [];
  };
  for await (const line of stdinLines()) {
    chunk.push(line);
    if (chunk.length === settings.batchSize * CHUNK_BATCHES) await flush();
  }
  if (chunk.length) await flush();
  if (!values.quiet && index) {
    const seconds = (performance.now() - started) / 1000;
    process.stderr.write(`${PROG}: translated ${index} lines in ${seconds.toFixed(1)} s `
      + `(${(index / seconds).toFixed(1)} lines/s)\n`);
  }
  return 0;
}

try {
  process.exitCode = await main();
} catch (error) {
  const known = error instanceof TranslatorError || error.code?.startsWith?.('ERR_PARSE_ARGS');
  process.stderr.write(`${PROG}: error: ${known ? error.message : error.stack}\n`);
  process.exitCode = known ? 2 : 1;
}
