// The page at /: translate with POST translate, models from GET models, and draw each
// translation's alignment as the paper's Fig. 3 (a heat map). Text is always set
// with textContent, never parsed as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const END = "</s>";  // the label of EOS, as keras-nmt evaluate's Fig. 3 writes it
// A pasted paragraph must not freeze the tab: alignments are asked for only for a short
// text, and only the first sentences' heat maps are drawn (a table cell per weight).
const ALIGN_MAX_CHARS = 2000;
const MAX_HEATMAPS = 8;
const MAX_HEATMAP_CELLS = 20000;
let models = [];

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

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
}

function render(sources, answer, aligned) {
  const results = $("results");
  results.replaceChildren();
  const drawn = {maps: 0, cells: 0, skipped: 0};
  answer.translations.forEach((t, i) => {
    const box = element("div", "sentence");
    box.append(element("p", "source", sources[i]), element("p", "best", t.text));
    const table = element("table", "nbest");
    const head = table.createTHead().insertRow();
    for (const title of ["#", "translation", "score"]) head.append(element("th", "", title));
    const body = table.createTBody();
    t.nbest.forEach((h, rank) => {
      const row = body.insertRow();
      row.append(element("td", "rank", String(rank + 1)), element("td", "hyp", h.text),
                 element("td", "score", h.score.toFixed(4)));
    });
    box.append(table);
    if (t.truncated > 0) {
      box.append(element("p", "note", `${t.truncated} source tokens beyond the model's limit were dropped.`));
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
      box.append(heatMap(block));
    }
    results.append(box);
  });
  const m = chosenModel();
  if (m && !m.alignment) {
    results.append(element("p", "note",
      "This export has no force-decoding model (an older keras-nmt wrote it), so no alignment is shown."));
  } else if (m && !aligned) {
    results.prepend(element("p", "note",
      `Alignments are shown for texts of at most ${ALIGN_MAX_CHARS} characters.`));
  } else if (drawn.skipped) {
    results.prepend(element("p", "note",
      `The alignments of the first ${drawn.maps} sentences are drawn; ${drawn.skipped} more are not.`));
  }
}

// The attention weights of a sentence's best translation: a column per source word, a
// row per target word (EOS last on both), each cell's grey the weight (black 0, white 1),
// as in Fig. 3 of Bahdanau et al. (2015). A table: its labels and cells are plain elements.
function heatMap(alignment) {
  const columns = [...alignment.source_tokens, END];
  const rows = [...alignment.target_tokens, END];
  const size = `${Math.max(16, Math.min(24, Math.floor(560 / columns.length)))}px`;
  const table = element("table", "heatmap");
  const head = table.createTHead().insertRow();
  head.append(element("th", "corner"));
  for (const label of columns) {
    const th = element("th", "column-label");
    th.append(element("span", "", label));
    th.scope = "col";
    head.append(th);
  }
  const body = table.createTBody();
  alignment.attention.forEach((weights, i) => {
    const row = body.insertRow();
    const th = element("th", "row-label", rows[i]);
    th.scope = "row";
    row.append(th);
    weights.forEach((weight, j) => {
      const grey = Math.round(255 * Math.min(1, Math.max(0, weight)));
      const td = element("td", "cell");
      td.style.background = `rgb(${grey}, ${grey}, ${grey})`;
      td.style.width = td.style.height = size;
      td.dataset.weight = String(weight);
      td.title = `${rows[i]} ← ${columns[j]}: ${weight.toFixed(3)}`;
      row.append(td);
    });
  });
  const figure = element("figure", "alignment");
  figure.append(table, element("figcaption", "note",
    "Alignment (attention weights): source words across, target words down; white 1, black 0."));
  return figure;
}

async function translate(event) {
  event.preventDefault();
  const sources = $("text").value.split("\n").filter((line) => line.trim());
  if (!sources.length) return;
  const m = chosenModel();
  const aligned = sources.join("\n").length <= ALIGN_MAX_CHARS;
  const request = {text: sources, beam: Number($("beam").value), nbest: Number($("nbest").value)};
  if (m) {
    Object.assign(request, {model: m.name, version: m.version,
                            alignment: Boolean(m.alignment) && aligned});
  }
  setStatus("translating…", false);
  $("translate").disabled = true;
  try {
    const answer = await fetch("translate", {
      method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(request),
    });
    const body = await answer.json();
    if (!answer.ok) {
      setStatus(body.error || `HTTP ${answer.status}`, true);
      return;
    }
    render(sources, body, aligned);
    setStatus("", false);
  } catch (error) {
    setStatus(String(error), true);
  } finally {
    $("translate").disabled = false;
  }
}

$("form").addEventListener("submit", translate);
$("model").addEventListener("change", modelChanged);
loadModels().catch((error) => setStatus(String(error), true));
