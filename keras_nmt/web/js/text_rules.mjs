// The text rules of keras-nmt in JavaScript: tokenizer, detokenizer, token words,
// sentence splitter and sentence join, run from the document that
// keras_nmt.text.rule_data.rule_document writes (the Python rewrite tables, converted to
// u-flag syntax). Nothing here is a rule of its own: each method walks the document's
// tables as keras_nmt.text.word, keras_nmt.text.sentences and keras_nmt.text.line_join do.
// An ES module with no import: it runs in Node.js and in a browser.

/** Compiled [RegExp, replacement] pairs of a table of [pattern, replacement]. */
function compile(table) {
  return table.map(([pattern, replacement]) => [new RegExp(pattern, 'gu'), replacement]);
}

/** `text` through the ordered rewrite table `rules` (keras_nmt.text.word.rewrite). */
function rewrite(text, rules) {
  for (const [pattern, replacement] of rules) text = text.replace(pattern, replacement);
  return text;
}

function compileLanguage(tables) {
  return {
    tokenize: compile(tables.tokenize),
    detokenize: compile(tables.detokenize),
    markedDetokenize: compile(tables.marked_detokenize),
    sentences: compile(tables.sentences),
    separator: tables.sentence_separator,
  };
}

export class TextRules {
  /** `doc`: the parsed JSON of rule_document(langs). Compiles every table once (ms). */
  constructor(doc) {
    if (doc.format !== 1) throw new Error(`text rules: unknown document format ${doc.format}`);
    const constants = doc.constants;
    this.separator = constants.token_separator;
    this.markers = constants.markers;
    this.quoteToken = constants.quote_token;
    this.break = constants.break;
    this.unescape = compile(constants.unescape);
    this.mayEnd = new RegExp(constants.may_end, 'u');
    this.spaces = new Set(constants.spaces);
    this.languages = new Map(
      Object.entries(doc.languages).map(([lang, tables]) => [lang, compileLanguage(tables)]));
  }

  /** The compiled tables of `lang`; throws for a language the document lacks. */
  rules(lang) {
    const found = this.languages.get(lang);
    if (found === undefined) {
      const held = [...this.languages.keys()].join(', ');
      const name = JSON.stringify(lang);
      throw new Error(`text rules: no language ${name} (the document holds ${held})`);
    }
    return found;
  }

  /** One raw sentence -> its word tokens (keras_nmt.text.word.tokenize). */
  tokenize(line, lang) {
    return rewrite(line, this.rules(lang).tokenize).split(' ').filter((token) => token);
  }

  /** Tokens joined, each wrapped in markers (keras_nmt.text.word.mark_tokens). */
  marked(tokens) {
    return this.markers.start + tokens.join(this.separator) + this.markers.end;
  }

  /** Tokens -> text (keras_nmt.text.word.detokenize); empty tokens are skipped. */
  detokenize(tokens, lang) {
    return rewrite(this.marked(tokens.filter((token) => token)), this.rules(lang).detokenize);
  }

  /** {words, owners}: the words of the detokenized text and, per token, the numbers of
   * the words its characters are in (keras_nmt.text.word.token_words), in one pass. */
  tokenWords(tokens, lang) {
    const kept = [];
    tokens.forEach((token, k) => { if (token) kept.push(k); });
    const joined = this.marked(kept.map((k) => tokens[k]));
    const text = rewrite(joined, this.rules(lang).markedDetokenize);
    const { start, end, open, close } = this.markers;
    const owners = tokens.map(() => []);
    const words = [];
    let current = -1;
    let inWord = false;
    for (let char of text) {  // by code point, as Python walks a str
      if (char === start || char === open || char === close) {
        current += 1;
        if (char === start) continue;
        char = this.quoteToken;
      } else if (char === end) {
        continue;
      }
      if (this.spaces.has(char)) {
        inWord = false;
        continue;
      }
      if (!inWord) {
        words.push('');
        inWord = true;
      }
      words[words.length - 1] += char;
      const found = owners[kept[current]];
      const word = words.length - 1;
      if (found.length === 0 || found[found.length - 1] !== word) found.push(word);
    }
    let last = 0;
    for (const found of owners) {
      if (found.length === 0 && words.length) found.push(last);
      if (found.length) last = found[found.length - 1];
    }
    return { words, owners };
  }

  /** The sentences of one line, in order (keras_nmt.text.sentences.split_sentences). */
  splitSentences(line, lang) {
    if (!this.mayEnd.test(line)) return [line];
    return rewrite(line, this.rules(lang).sentences).split(this.break)
      .map((sentence) => rewrite(sentence, this.unescape));
  }

  /** Sentences' translations as one text, empty ones left out (line_join.join_texts). */
  joinTexts(texts, lang) {
    return texts.filter((text) => text).join(this.rules(lang).separator);
  }
}
