// What both translation pages draw (keras-nmt serve's and the web export's): words
// coloured by the model's confidence, their legend, and an alignment as the paper's
// Fig. 3. Text is always set with textContent, never parsed as HTML.

export const END = '</s>';  // the label of EOS, as keras-nmt evaluate's Fig. 3 writes it
// A word's confidence falls in one of these bins (upper bounds), each a colour of a
// blue-orange scale that colour-blind readers tell apart too (page.css, .conf-N).
export const CONFIDENCE_BINS = [0.2, 0.4, 0.6, 0.8, Infinity];

export function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

export function confidenceBin(value) {
  return CONFIDENCE_BINS.findIndex((upper) => value < upper);
}

/** `best` shows `text`, each of its `words` ([word, figure] in order) in a span coloured
 * by its figure; its textContent stays `text` exactly. */
export function showWords(best, text, words) {
  best.replaceChildren();
  let at = 0;
  for (const [word, value] of words || []) {
    const start = text.indexOf(word, at);
    if (start < 0) break;  // not the text's words: the rest stays plain
    if (start > at) best.append(document.createTextNode(text.slice(at, start)));
    const span = element('span', `word conf-${confidenceBin(value)}`, word);
    span.dataset.confidence = String(value);
    span.title = `confidence ${value.toFixed(3)}`;
    best.append(span);
    at = start + word.length;
  }
  if (at < text.length) best.append(document.createTextNode(text.slice(at)));
}

export function legend() {
  const box = element('div', 'legend');
  box.append(element('span', 'legend-title', 'Word confidence:'));
  let lower = 0;
  CONFIDENCE_BINS.forEach((upper, bin) => {
    const label = upper === Infinity ? `≥ ${lower}` : `${lower}–${upper}`;
    box.append(element('span', `swatch conf-${bin}`, label));
    lower = upper;
  });
  return box;
}

/** The attention weights of a translation: a column per source token, a row per target
 * token (EOS last on both; the labels given without it), each cell's grey the weight
 * `weight(i, j)` (black 0, white 1), as in Fig. 3 of Bahdanau et al. (2015). */
export function heatMap(sourceTokens, targetTokens, weight) {
  const columns = [...sourceTokens, END];
  const rows = [...targetTokens, END];
  const size = `${Math.max(16, Math.min(24, Math.floor(560 / columns.length)))}px`;
  const table = element('table', 'heatmap');
  const head = table.createTHead().insertRow();
  head.append(element('th', 'corner'));
  for (const label of columns) {
    const th = element('th', 'column-label');
    th.append(element('span', '', label));
    th.scope = 'col';
    head.append(th);
  }
  const body = table.createTBody();
  rows.forEach((label, i) => {
    const row = body.insertRow();
    const th = element('th', 'row-label', label);
    th.scope = 'row';
    row.append(th);
    columns.forEach((source, j) => {
      const value = weight(i, j);
      const grey = Math.round(255 * Math.min(1, Math.max(0, value)));
      const td = element('td', 'cell');
      td.style.background = `rgb(${grey}, ${grey}, ${grey})`;
      td.style.width = size;
      td.style.height = size;
      td.dataset.weight = String(value);
      td.title = `${label} ← ${source}: ${value.toFixed(3)}`;
      row.append(td);
    });
  });
  const figure = element('figure', 'alignment');
  figure.append(table, element('figcaption', 'note',
    'Alignment (attention weights): source words across, target words down; white 1, black 0.'));
  return figure;
}
