// Runs text_rules.mjs on lines, for keras_nmt.web.rules_check (Node.js).
//
//   node rules_cli.mjs RULES.json   stdin: JSON lines {"lang": ..., "line": ...}; stdout: one
//       JSON line each, {tokens, detokenized, sentences, words, owners} (detokenized and
//       words/owners are of its own tokens), in order, as the lines come.
//   node rules_cli.mjs --classes    stdin: one JSON object {name: pattern}; stdout: one JSON
//       object {name: [[first, last], ...]}, the ranges of code points (surrogates left
//       out) that the u-flag pattern matches as a whole.
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { once } from 'node:events';

import { TextRules } from './text_rules.mjs';

const BATCH = 1000;  // lines written at a time

function outputs(rules, { lang, line }) {
  const tokens = rules.tokenize(line, lang);
  const { words, owners } = rules.tokenWords(tokens, lang);
  return {
    tokens,
    detokenized: rules.detokenize(tokens, lang),
    sentences: rules.splitSentences(line, lang),
    words,
    owners,
  };
}

async function write(text) {
  if (!process.stdout.write(text)) await once(process.stdout, 'drain');
}

async function runLines(path) {
  const rules = new TextRules(JSON.parse(readFileSync(path, 'utf8')));
  const input = createInterface({ input: process.stdin, crlfDelay: Infinity });
  let batch = [];
  for await (const line of input) {
    batch.push(JSON.stringify(outputs(rules, JSON.parse(line))));
    if (batch.length === BATCH) {
      await write(batch.join('\n') + '\n');
      batch = [];
    }
  }
  if (batch.length) await write(batch.join('\n') + '\n');
}

function ranges(pattern) {
  const whole = new RegExp(`^(?:${pattern})$`, 'u');
  const found = [];
  for (let point = 0; point <= 0x10ffff; point += 1) {
    if (point >= 0xd800 && point <= 0xdfff) continue;
    if (!whole.test(String.fromCodePoint(point))) continue;
    const last = found[found.length - 1];
    if (last && last[1] === point - 1) last[1] = point;
    else found.push([point, point]);
  }
  return found;
}

async function runClasses() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const patterns = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const found = Object.fromEntries(
    Object.entries(patterns).map(([name, pattern]) => [name, ranges(pattern)]));
  await write(JSON.stringify(found) + '\n');
}

const [argument] = process.argv.slice(2);
if (!argument) {
  process.stderr.write('usage: node rules_cli.mjs RULES.json | --classes\n');
  process.exit(2);
}
await (argument === '--classes' ? runClasses() : runLines(argument));
