// The translator of a web export: `keras-nmt onnx-translate`'s pipeline in JavaScript, for
// the browser and Node.js alike (no import of either's own modules).
//
// A line is split into sentences, each sentence tokenized and cut to the export's longest
// source, the sentences sorted by length and decoded in batches (those holding a rare
// source word apart, as vocabulary selection needs), each hypothesis's <unk> replaced by
// its most attended source word through the export's dictionary, detokenized, and the
// sentences joined into the line. Every rule of text comes from the export's rules.json,
// written by Python (keras_nmt.text.rule_data) and run by text_rules.mjs; every number
// (reserved ids, limits, selection) from its web.json. Nothing is decided here that the
// Python translator decides otherwise: tests compare the two line by line.
//
// Cost: one onnxruntime run per batch; the rules are linear in a line's characters; the
// join of a line's n-best lists is O(sentences * n log n).

import { TextRules } from './text_rules.mjs';

/** An error a user can fix (a bad option, a file that is not an export): one line. */
export class TranslatorError extends Error {}

const TEXT = new TextDecoder('utf-8', { fatal: true });

/** The token list of a vocabulary file (one token a line, in id order). */
function vocabularyTokens(bytes) {
  const lines = TEXT.decode(bytes).split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  return lines.map((line) => line.replace(/[\r\n]+$/u, ''));
}

class Vocabulary {
  constructor(tokens, reserved) {
    this.tokens = tokens;
    this.reserved = reserved;
    this.ids = new Map(tokens.map((token, id) => [token, id]));
  }

  encode(tokens) {
    return tokens.map((token) => this.ids.get(token) ?? this.reserved.unk_id);
  }

  /** Tokens up to the first EOS, PAD and BOS skipped (Python's Vocabulary.decode). */
  decode(ids) {
    const { pad_id: pad, bos_id: bos, eos_id: eos, unk } = this.reserved;
    const out = [];
    for (const value of ids) {
      const id = Number(value);
      if (id === eos) break;
      if (id === pad || id === bos) continue;
      out.push(id >= 0 && id < this.tokens.length ? this.tokens[id] : unk);
    }
    return out;
  }
}

/** numpy's pairwise sum of a float64 array (np.mean's order), so means agree to the bit. */
function pairwiseSum(values, start = 0, count = values.length) {
  if (count < 8) {
    let sum = 0;
    for (let i = start; i < start + count; i += 1) sum += values[i];
    return sum;
  }
  if (count <= 128) {
    const r = Array.from({ length: 8 }, (_, k) => values[start + k]);
    let i = 8;
    for (; i < count - (count % 8); i += 8) {
      for (let k = 0; k < 8; k += 1) r[k] += values[start + i + k];
    }
    let sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < count; i += 1) sum += values[start + i];
    return sum;
  }
  let half = Math.floor(count / 2);
  half -= half % 8;
  return pairwiseSum(values, start, half) + pairwiseSum(values, start + half, count - half);
}

/** `value` to `digits` decimals as Python rounds (round(), format's "f"): to the
 * nearest, ties to even on the exact binary value; a string, "-" kept on a negative. */
export function fixed(value, digits) {
  if (!Number.isFinite(value)) return String(value);
  const [whole, fraction] = Math.abs(value).toFixed(80).split('.');
  const kept = BigInt(whole + fraction.slice(0, digits));
  const rest = fraction.slice(digits);
  const up = rest[0] > '5' || (rest[0] === '5' && (/[1-9]/u.test(rest.slice(1)) || kept % 2n === 1n));
  const text = String(kept + (up ? 1n : 0n)).padStart(digits + 1, '0');
  const sign = value < 0 || Object.is(value, -0) ? '-' : '';
  return digits ? `${sign}${text.slice(0, -digits)}.${text.slice(-digits)}` : sign + text;
}

/** Python's round(value, 6), as a number. */
export function round6(value) {
  return Number.isFinite(value) ? Number(fixed(value, 6)) : value;
}

/** A hypothesis's confidence from its tokens' log-probabilities (then EOS's). */
function confidenceOf(logprobs, tokens, rules, lang) {
  const values = Float64Array.from(logprobs);
  const { words, owners } = rules.tokenWords(tokens, lang);
  const lowest = new Float64Array(words.length).fill(Infinity);
  owners.forEach((found, k) => {
    for (const w of found) lowest[w] = Math.min(lowest[w], values[k]);
  });
  return {
    meanLogprob: pairwiseSum(values) / values.length,
    tokens: values.length,
    words,
    wordConfidences: Array.from(lowest, (v) => Math.exp(Number.isFinite(v) ? v : 0)),
  };
}

/** A line's confidence from its sentences' (Python's join_confidences). */
function joinConfidences(parts) {
  const found = parts.filter((part) => part);
  if (found.length <= 1) return found[0] ?? null;
  const tokens = found.reduce((sum, part) => sum + part.tokens, 0);
  const weighted = found.reduce((sum, part) => sum + part.meanLogprob * part.tokens, 0);
  return {
    meanLogprob: weighted / tokens,
    tokens,
    words: found.flatMap((part) => part.words),
    wordConfidences: found.flatMap((part) => part.wordConfidences),
  };
}

/** Each <unk> by its most attended source word, through the dictionary. */
function replaceUnknowns(tokens, sourceTokens, weights, columns, dictionary, unk) {
  if (!tokens.includes(unk) || !sourceTokens.length) return tokens;
  return tokens.map((token, step) => {
    if (token !== unk) return token;
    let best = 0;
    for (let j = 1; j < sourceTokens.length; j += 1) {
      if (weights[step * columns + j] > weights[step * columns + best]) best = j;
    }
    if (!(weights[step * columns + best] > 0)) return token;
    const word = sourceTokens[best];
    return Object.hasOwn(dictionary, word) ? dictionary[word] : word;
  });
}

/** The `count` best combinations of one hypothesis per sentence, by the weighted mean of
 * their scores in float32, as Python's line_join.line_nbest merges them. */
function lineNbest(scores, weights, count) {
  const f = Math.fround;
  let best = [{ total: f(0), chosen: [] }];
  scores.forEach((found, n) => {
    const order = found.map((_, k) => k).sort((a, b) => found[b] - found[a] || a - b);
    const values = order.map((k) => f(f(weights[n]) * f(found[k])));
    best = bestSums(best, values, order, count);
  });
  const total = f(weights.reduce((sum, w) => sum + w, 0));
  return best.map(({ total: value, chosen }) => ({ score: f(value / total), chosen }));
}

function bestSums(prefixes, values, order, count) {
  const entry = (i, j) => ({ key: -Math.fround(prefixes[i].total + values[j]), i, j });
  const before = (a, b) => a.key - b.key || a.i - b.i || a.j - b.j;
  const frontier = [entry(0, 0)];
  const seen = new Set(['0,0']);
  const out = [];
  while (frontier.length && out.length < count) {
    frontier.sort(before);
    const { key, i, j } = frontier.shift();
    out.push({ total: -key, chosen: [...prefixes[i].chosen, order[j]] });
    for (const [a, b] of [[i + 1, j], [i, j + 1]]) {
      if (a < prefixes.length && b < values.length && !seen.has(`${a},${b}`)) {
        seen.add(`${a},${b}`);
        frontier.push(entry(a, b));
      }
    }
  }
  return out;
}

/** The block-diagonal attention of a line's sentences: {rows, columns, data}. */
function blockDiagonal(parts) {
  const matrices = parts.map((part) => part.attention).filter((m) => m);
  if (!matrices.length) return null;
  const rows = matrices.reduce((sum, m) => sum + m.rows, 0);
  const columns = matrices.reduce((sum, m) => sum + m.columns, 0);
  const data = new Float32Array(rows * columns);
  let row = 0;
  let column = 0;
  for (const m of matrices) {
    for (let r = 0; r < m.rows; r += 1) {
      data.set(m.data.subarray(r * m.columns, (r + 1) * m.columns), (row + r) * columns + column);
    }
    row += m.rows;
    column += m.columns;
  }
  return { rows, columns, data };
}

const BLANK = Object.freeze({
  text: '', tokens: [], score: 0, sourceTokens: [], attention: null, truncated: 0,
  confidence: null, sentences: [], alternatives: [],
});

export class Translator {
  /** Use {@link loadTranslator}. */
  constructor({ ort, session, metadata, rules, sourceVocabulary, targetVocabulary, dictionary }) {
    this.ort = ort;
    this.session = session;
    this.metadata = metadata;
    this.rules = rules;
    this.source = sourceVocabulary;
    this.target = targetVocabulary;
    this.dictionary = dictionary;
    this.rare = new Set(metadata.rare_sources);
    this.outputs = new Set(session.outputNames);
  }

  get src() { return this.metadata.src; }

  /** Whether the export's graph holds a lexical table (vocabulary selection). */
  get selects() { return this.session.inputNames.includes('shortlist_best'); }

  get tgt() { return this.metadata.tgt; }

  /** Whether the search returns attention (heat maps, <unk> replacement). */
  get attends() { return this.outputs.has('attention'); }

  /** Whether the search returns its tokens' log-probabilities (confidences). */
  get scoresTokens() { return this.outputs.has('token_logprobs'); }

  /** A sentence as the model reads it: tokens cut to the longest source, ids with EOS. */
  read(sentence) {
    const tokens = this.rules.tokenize(sentence, this.src);
    const kept = tokens.slice(0, this.metadata.max_source_len);
    const ids = [...this.source.encode(kept), this.metadata.reserved.eos_id];
    return { tokens: kept, ids, truncated: tokens.length - kept.length };
  }

  /** The options of {@link translate}, checked and completed with the export's. */
  settings(options = {}) {
    const meta = this.metadata;
    const beam = options.beam ?? Math.max(meta.beam_size, options.nbest ?? 1);
    const nbest = options.nbest ?? 1;
    const batchSize = options.batchSize ?? 32;
    for (const [name, value] of [['beam', beam], ['nbest', nbest], ['batchSize', batchSize]]) {
      if (!Number.isInteger(value) || value < 1) {
        throw new TranslatorError(`${name} must be a positive integer, got ${value}`);
      }
    }
    if (nbest > meta.nbest) {
      throw new TranslatorError(`this export returns at most ${meta.nbest} hypotheses per `
        + `sentence, got nbest=${nbest}`);
    }
    if (nbest > beam) throw new TranslatorError(`nbest (${nbest}) cannot exceed the beam size (${beam})`);
    const unkReplace = options.unkReplace ?? meta.unk_replace;
    const attention = unkReplace || Boolean(options.attention);
    if (attention && !this.attends) {
      throw new TranslatorError('this export\'s search returns no attention (export with --unk-replace)');
    }
    if (options.confidence && !this.scoresTokens) {
      throw new TranslatorError('this export\'s search returns no token log-probabilities: export the run again');
    }
    const shortlist = options.shortlist ?? true;
    if (Array.isArray(shortlist) && !this.selects) {
      throw new TranslatorError('this export has no lexical table (export with --shortlist F,B)');
    }
    const [frequent, best] = shortlist === true ? (meta.shortlist ?? [0, 0])
      : shortlist || [0, 0];
    return {
      beam, nbest, batchSize, unkReplace, attention, confidence: Boolean(options.confidence),
      alpha: options.alpha ?? meta.alpha, forbidUnk: Boolean(options.forbidUnk),
      split: options.splitSentences ?? meta.split_sentences,
      frequent, best, rareApart: Boolean(frequent || best) && this.rare.size > 0,
    };
  }

  /** One translation per line, in order. `options`: beam, nbest, alpha, forbidUnk,
   * batchSize, splitSentences, unkReplace, attention (keep each sentence's), confidence,
   * shortlist (true: the export's; [F, B]; false: the whole vocabulary), onBatch (hears
   * the sentences each batch decoded). */
  async translate(lines, options = {}) {
    const settings = this.settings(options);
    const parts = lines.map((line) => (settings.split ? this.rules.splitSentences(line, this.src) : [line]));
    const items = parts.flat().map((sentence) => this.read(sentence));
    const results = items.map((item) => (item.tokens.length ? null : blank(settings.nbest)));
    for (const chosen of this.batches(items, settings)) {
      const found = await this.decode(chosen.map((i) => items[i]), settings);
      chosen.forEach((i, k) => { results[i] = found[k]; });
      options.onBatch?.(chosen.length);
    }
    let start = 0;
    return parts.map((found) => {
      const joined = this.join(results.slice(start, start + found.length));
      start += found.length;
      return joined;
    });
  }

  /** The sentences to decode, sorted by length, cut into batches (rare ones apart). */
  batches(items, settings) {
    const todo = items.map((_, i) => i).filter((i) => items[i].tokens.length)
      .sort((a, b) => items[a].tokens.length - items[b].tokens.length);
    const rare = (i) => settings.rareApart && items[i].ids.some((id) => this.rare.has(id));
    const out = [];
    for (const apart of [false, true]) {
      const members = todo.filter((i) => rare(i) === apart);
      for (let k = 0; k < members.length; k += settings.batchSize) {
        out.push(members.slice(k, k + settings.batchSize));
      }
    }
    return out;
  }

  feeds(sources, settings) {
    const { Tensor } = this.ort;
    const width = Math.max(...sources.map((source) => source.ids.length));
    const ids = new Int32Array(sources.length * width);  // PAD is 0
    sources.forEach((source, row) => ids.set(source.ids, row * width));
    const scalar = (type, value) => new Tensor(type, type === 'bool' ? [value]
      : (type === 'int32' ? Int32Array : Float32Array).from([value]), []);
    const feeds = {
      source_ids: new Tensor('int32', ids, [sources.length, width]),
      beam_size: scalar('int32', settings.beam),
      alpha: scalar('float32', settings.alpha),
      forbid_unk: scalar('bool', settings.forbidUnk),
      max_length: scalar('int32', 0),  // the export's decode-ratio rule
    };
    if (this.selects) {
      feeds.shortlist_frequent = scalar('int32', settings.frequent);
      feeds.shortlist_best = scalar('int32', settings.best);
    }
    return feeds;
  }

  async decode(sources, settings) {
    const fetches = ['ids', 'lengths', 'scores'];
    if (settings.attention) fetches.push('attention');
    if (settings.confidence) fetches.push('token_logprobs');
    const found = await this.session.run(this.feeds(sources, settings), fetches);
    const [, slots, steps] = found.ids.dims;
    return sources.map((source, row) => ranked(Array.from(
      { length: Math.min(settings.nbest, slots) }, (_, n) => n,
    ).map((n) => this.hypothesis(source, found, row * slots + n, steps, settings))
      .filter((h) => h), settings.nbest));
  }

  /** Slot `slot` of a search's outputs as a translation, or null when no hypothesis filled it. */
  hypothesis(source, found, slot, steps, settings) {
    const length = Number(found.lengths.data[slot]);
    if (length === 0) return null;
    const ids = found.ids.data.subarray(slot * steps, slot * steps + length);
    let tokens = this.target.decode(ids);
    let attention = null;
    if (settings.attention) {
      const [, , rows, width] = found.attention.dims;
      const columns = source.ids.length;
      const data = new Float32Array(length * columns);
      for (let r = 0; r < length; r += 1) {
        const at = (slot * rows + r) * width;
        data.set(found.attention.data.subarray(at, at + columns), r * columns);
      }
      attention = { rows: length, columns, data };
      if (settings.unkReplace) {
        tokens = replaceUnknowns(tokens, source.tokens, data, columns, this.dictionary,
          this.metadata.reserved.unk);
      }
    }
    const scored = settings.confidence ? found.token_logprobs.dims[2] : 0;
    const logprobs = settings.confidence
      ? found.token_logprobs.data.subarray(slot * scored, slot * scored + length) : null;
    return {
      text: this.rules.detokenize(tokens, this.tgt),
      tokens,
      score: found.scores.data[slot],
      sourceTokens: source.tokens,
      attention,
      truncated: source.truncated,
      confidence: logprobs ? confidenceOf(logprobs, tokens, this.rules, this.tgt) : null,
      sentences: [],
      alternatives: [],
    };
  }

  /** A line's translation from its sentences' (Python's join_translations). */
  join(parts) {
    if (parts.length === 1) return parts[0];
    const lists = parts.map((part) => (part.alternatives.length ? part.alternatives : [part]));
    const combinations = lineNbest(
      lists.map((found) => found.map((h) => h.score)),
      parts.map((part) => part.sourceTokens.length + 1),
      Math.max(...lists.map((found) => found.length)),
    );
    const hypotheses = combinations.map(({ score, chosen }) => {
      const row = chosen.map((k, n) => lists[n][k]);
      return {
        text: this.rules.joinTexts(row.map((h) => h.text), this.tgt),
        tokens: row.flatMap((h) => h.tokens),
        score,
        sourceTokens: row.flatMap((h) => h.sourceTokens),
        attention: blockDiagonal(row),
        truncated: row.reduce((sum, h) => sum + h.truncated, 0),
        confidence: null,
        sentences: row,
        alternatives: [],
      };
    });
    return {
      ...hypotheses[0],
      alternatives: parts.some((part) => part.alternatives.length) ? hypotheses : [],
      sentences: parts,
      confidence: joinConfidences(parts.map((part) => part.confidence)),
    };
  }
}

function ranked(hypotheses, nbest) {
  return nbest > 1 ? { ...hypotheses[0], alternatives: hypotheses } : hypotheses[0];
}

function blank(nbest) {
  return ranked([{ ...BLANK }], nbest);
}

/** The figures a command writes for a line (Python's confidence.line_fields). */
export function confidenceFields(translation) {
  const line = translation.confidence;
  if (!line) return { confidence: null, sentences: [], words: [] };
  const parts = translation.sentences.length ? translation.sentences : [translation];
  return {
    confidence: round6(Math.exp(line.meanLogprob)),
    sentences: parts.filter((part) => part.confidence)
      .map((part) => round6(Math.exp(part.confidence.meanLogprob))),
    words: line.words.map((word, k) => [word, round6(line.wordConfidences[k])]),
  };
}

/**
 * Loads a web export. `read(path)` gives the bytes of a file of the folder (a path
 * relative to it: a fetch in the browser, a file read in Node); `ort` is onnxruntime-web's
 * module, its `env` set by the caller (threads, the wasm files' place); `onProgress(step,
 * done, total)` hears each file loaded.
 */
export async function loadTranslator({ ort, read, onProgress = () => {} }) {
  const json = async (path) => JSON.parse(TEXT.decode(await read(path)));
  const metadata = await json('model/web.json');
  if (metadata.format !== 1) {
    throw new TranslatorError(`model/web.json: format ${metadata.format} is not one this module reads`);
  }
  const steps = ['rules', 'vocabularies', 'dictionary', 'model'];
  onProgress(steps[0], 0, steps.length);
  const rules = new TextRules(await json(metadata.files.rules));
  onProgress(steps[1], 1, steps.length);
  const reserved = metadata.reserved;
  const [sourceTokens, targetTokens] = await Promise.all(
    [metadata.files.source_vocab, metadata.files.target_vocab].map(async (path) => vocabularyTokens(await read(path))),
  );
  onProgress(steps[2], 2, steps.length);
  const dictionary = metadata.files.dictionary ? await json(metadata.files.dictionary) : {};
  onProgress(steps[3], 3, steps.length);
  const session = await ort.InferenceSession.create(await read(metadata.files.model),
    { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
  onProgress('ready', steps.length, steps.length);
  return new Translator({
    ort, session, metadata, rules, dictionary,
    sourceVocabulary: new Vocabulary(sourceTokens, reserved),
    targetVocabulary: new Vocabulary(targetTokens, reserved),
  });
}
