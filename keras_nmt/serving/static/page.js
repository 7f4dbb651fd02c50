// The page at /: translate with POST translate, models from GET models, and draw each
// translation's alignment as the paper's Fig. 3 (a heat map). With a model that takes
// constraints, a translation can be edited: from the cursor on, the model completes it
// (the text before the cursor sent as its "prefix"), and the glossary's terms are sent
// with every request. With a model that gives confidence, each output word is coloured by
// the model's confidence in it and the sentence's figure is shown. Text is always set with
// textContent, never parsed as HTML. An ES module (figures.mjs draws the figures).
import { element, heatMap, legend, showWords } from "./figures.mjs";

const $ = (id) => document.getElementById(id);
// A pasted paragraph must not freeze the tab: alignments are asked for only for a short
// text, and only the first sentences' heat maps are drawn (a table cell per weight).
const ALIGN_MAX_CHARS = 2000;
const MAX_HEATMAPS = 8;
const MAX_HEATMAP_CELLS = 20000;
// A completion is asked for once typing pauses this long.
const COMPLETE_AFTER_MS = 300;
// The server's own limits on a glossary (MAX_GLOSSARY_TERMS) and a phrase.
const MAX_TERMS = 64;
let models = [];

function chosenModel() {
  return models[Number($("model").value)] || models[0];
}

function setStatus(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

async function loadModels() {
  const answer = await fetch("models");
  models = (await answer.json()).models;
  for (const [index, m] of models.entries()) {
    const option = element("option", "", `${m.name} ${m.version} (${m.src} → ${m.tgt})`);
    option.value = String(index);
    $("model").append(option);
  }
  modelChanged();
}

function modelChanged() {
  const m = chosenModel();
  if (!m) return;
  $("beam").value = m.beam;
  $("nbest").max = m.max_nbest;
  $("nbest").value = Math.min(Number($("nbest").value) || 1, m.max_nbest);
  $("glossary-box").hidden = !m.constraints;
  $("edit-help").hidden = !m.constraints;
}

// ---- the glossary ---------------------------------------------------------------------

function addTerm(source, target) {
  const row = element("div", "term");
  const from = element("input", "term-source");
  const to = element("input", "term-target");
  from.placeholder = "source term";
  to.placeholder = "target term";
  from.value = source || "";
  to.value = target || "";
  const remove = element("button", "remove-term", "×");
  remove.type = "button";
  remove.title = "remove this term";
  remove.addEventListener("click", () => row.remove());
  row.append(from, to, remove);
  $("glossary").append(row);
  return row;
}

// Pasted "source<TAB>target" lines (a TSV glossary) fill a row each.
function pasteTerms(event) {
  const text = event.clipboardData ? event.clipboardData.getData("text") : "";
  if (!text.includes("\t")) return;
  event.preventDefault();
  for (const line of text.split(/\r?\n/)) {
    const [source, target] = line.split("\t");
    if (source && source.trim() && target && target.trim()) addTerm(source.trim(), target.trim());
  }
  for (const row of [...$("glossary").children]) {
    const [from, to] = row.querySelectorAll("input");
    if (!from.value.trim() && !to.value.trim() && $("glossary").children.length > 1) row.remove();
  }
}

// The [source, target] pairs of the rows that have both.
function glossaryTerms() {
  const terms = [];
  for (const row of $("glossary").children) {
    const [from, to] = row.querySelectorAll("input");
    if (from.value.trim() && to.value.trim()) terms.push([from.value.trim(), to.value.trim()]);
  }
  return terms.slice(0, MAX_TERMS);
}

// ---- requests -------------------------------------------------------------------------

// The body of POST translate for `sources`, with `prefixes` (one a source, or none).
// Alignments and confidences (one force-decoding pass) are asked for a short text only.
function request(sources, prefixes) {
  const m = chosenModel();
  const aligned = sources.join("\n").length <= ALIGN_MAX_CHARS;
  const body = {text: sources, beam: Number($("beam").value), nbest: Number($("nbest").value)};
  if (m) {
    Object.assign(body, {model: m.name, version: m.version,
                         alignment: Boolean(m.alignment) && aligned,
                         confidence: Boolean(m.confidence) && aligned});
    if (m.constraints) {
      const terms = glossaryTerms();
      if (terms.length) body.glossary = terms;
      if (prefixes && prefixes.some((p) => p)) body.prefix = prefixes;
    }
  }
  return {body, aligned};
}

async function ask(body) {
  const answer = await fetch("translate", {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body),
  });
  const found = await answer.json();
  if (!answer.ok) throw new Error(found.error || `HTTP ${answer.status}`);
  return found;
}

// ---- the results ----------------------------------------------------------------------

function render(sources, answer, aligned) {
  const results = $("results");
  results.replaceChildren();
  const drawn = {maps: 0, cells: 0, skipped: 0};
  const m = chosenModel();
  if (answer.translations.some((t) => t.words && t.words.length)) results.append(legend());
  answer.translations.forEach((t, i) => {
    const box = element("div", "sentence");
    box.dataset.index = String(i);
    const best = element("p", "best");
    showTranslation(best, t);
    box.append(element("p", "source", sources[i]), best);
    if (m && m.constraints) editable(box, best, sources[i]);
    fill(box, t, drawn);
    results.append(box);
  });
  if (m && !m.alignment) {
    results.append(element("p", "note",
      "This export has no force-decoding model (an older keras-nmt wrote it), so no alignment is shown."));
  } else if (m && !aligned) {
    results.prepend(element("p", "note",
      `Alignments and confidences are shown for texts of at most ${ALIGN_MAX_CHARS} characters.`));
  } else if (drawn.skipped) {
    results.prepend(element("p", "note",
      `The alignments of the first ${drawn.maps} sentences are drawn; ${drawn.skipped} more are not.`));
  }
}

// What a box shows below its translation: the n-best list, notes, the heat maps.
function fill(box, t, drawn) {
  for (const old of box.querySelectorAll(":scope > :not(.source):not(.best)")) old.remove();
  const table = element("table", "nbest");
  const head = table.createTHead().insertRow();
  for (const title of ["#", "translation", "score"]) head.append(element("th", "", title));
  const body = table.createTBody();
  t.nbest.forEach((h, rank) => {
    const row = body.insertRow();
    row.append(element("td", "rank", String(rank + 1)), element("td", "hyp", h.text),
               element("td", "score", h.score.toFixed(4)));
  });
  if (typeof t.confidence === "number") {
    const parts = t.sentences && t.sentences.length > 1
      ? ` (sentences: ${t.sentences.map((c) => c.toFixed(3)).join(", ")})` : "";
    const figure = element("p", "confidence", `Confidence ${t.confidence.toFixed(3)}${parts}`);
    figure.dataset.confidence = String(t.confidence);
    figure.title = "exp(mean token log-probability): how sure the model is, not a probability of being right";
    box.append(figure);
  }
  box.append(table);
  if (t.truncated > 0) {
    box.append(element("p", "note", `${t.truncated} source tokens beyond the model's limit were dropped.`));
  }
  if (t.unmet && t.unmet.length) {
    box.append(element("p", "note unmet",
      `The length limit came first: missing ${t.unmet.map((p) => `“${p}”`).join(", ")}.`));
  }
  // A block per sentence of the line, each its own small matrix.
  for (const block of (t.alignment ? t.alignment.sentences : [])) {
    if (!block.attention) {
      box.append(element("p", "note", "This model has no attention (RNNencdec): no alignment to show."));
      break;
    }
    const cells = block.attention.length * (block.source_tokens.length + 1);
    if (drawn.maps >= MAX_HEATMAPS || drawn.cells + cells > MAX_HEATMAP_CELLS) {
      drawn.skipped += 1;
      continue;
    }
    drawn.maps += 1;
    drawn.cells += cells;
    box.append(heatMap(block.source_tokens, block.target_tokens,
                       (i, j) => block.attention[i][j]));
  }
}

// ---- confidence --------------------------------------------------------------------------

// `best` shows t.text, each of its words coloured by its figure (figures.mjs); its
// textContent stays t.text exactly, which the editing reads.
function showTranslation(best, t) {
  best.classList.remove("stale");
  showWords(best, t.text, t.words);
}

// ---- completing an edited translation ---------------------------------------------------

// The text of `node` before the cursor, or null when the cursor is not in it.
function textBeforeCursor(node) {
  const selection = window.getSelection();
  if (!selection.rangeCount) return null;
  const range = selection.getRangeAt(0);
  if (!node.contains(range.endContainer)) return null;
  const before = document.createRange();
  before.selectNodeContents(node);
  before.setEnd(range.endContainer, range.endOffset);
  return before.toString();
}

// The cursor `offset` characters into the text of `node` (its words may be spans).
function placeCursor(node, offset) {
  const range = document.createRange();
  const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
  let left = offset;
  let text = walker.nextNode();
  let placed = false;
  while (text) {
    const next = walker.nextNode();
    if (left <= text.length || !next) {
      range.setStart(text, Math.min(left, text.length));
      placed = true;
      break;
    }
    left -= text.length;
    text = next;
  }
  if (!placed) range.setStart(node, 0);
  range.collapse(true);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
}

// The translation `best` of line `source` becomes editable: typing pauses, the text before
// the cursor goes out as the prefix, and the answer replaces the rest (only if nothing was
// typed meanwhile: a later answer is on its way then).
function editable(box, best, source) {
  best.contentEditable = "plaintext-only";
  best.spellcheck = false;
  best.title = "Edit: the model completes the translation from the cursor on";
  let timer = null;
  let asked = 0;
  best.addEventListener("input", () => {
    best.classList.add("stale");  // the words' colours were the old text's
    clearTimeout(timer);
    timer = setTimeout(() => complete(), COMPLETE_AFTER_MS);
  });

  async function complete() {
    const prefix = textBeforeCursor(best);
    if (prefix === null) return;
    const sent = best.textContent;
    const mine = ++asked;
    const {body} = request([source], [prefix.trim() ? prefix : null]);
    setStatus("completing…", false);
    try {
      const answer = await ask(body);
      if (mine !== asked || best.textContent !== sent) return;  // typed since: stale
      const t = answer.translations[0];
      showTranslation(best, t);
      // The cursor stays where it was, after the prefix, when the completion starts with it.
      placeCursor(best, t.text.startsWith(prefix) ? prefix.length : commonStart(prefix, t.text));
      fill(box, t, {maps: 0, cells: 0, skipped: 0});
      box.dataset.prefix = prefix;
      setStatus("", false);
    } catch (error) {
      if (mine === asked) setStatus(error.message || String(error), true);
    }
  }
}

function commonStart(a, b) {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n += 1;
  return n;
}

async function translate(event) {
  event.preventDefault();
  const sources = $("text").value.split("\n").filter((line) => line.trim());
  if (!sources.length) return;
  const {body, aligned} = request(sources, null);
  setStatus("translating…", false);
  $("translate").disabled = true;
  try {
    render(sources, await ask(body), aligned);
    setStatus("", false);
  } catch (error) {
    setStatus(error.message || String(error), true);
  } finally {
    $("translate").disabled = false;
  }
}

$("form").addEventListener("submit", translate);
$("model").addEventListener("change", modelChanged);
$("add-term").addEventListener("click", () => addTerm().querySelector("input").focus());
$("glossary").addEventListener("paste", pasteTerms);
addTerm();
loadModels().catch((error) => setStatus(String(error), true));
