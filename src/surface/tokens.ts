// What a tool definition costs a host's model, in tokens. Two ways to count the same text:
//
// - countTokens: exact, with gpt-tokenizer's o200k_base encoding. There is no public Claude
//   tokenizer; o200k_base is the current OpenAI encoding (GPT-4o and later) and a reasonable
//   proxy for what any recent model pays. The package costs megabytes and tens of milliseconds
//   to load (bench/surface/token-estimate.mjs measures it), so it is imported on first use
//   only: the CLI and the bench pay for it, the daemon never does.
// - estimateTokens: a single pass over the UTF-16 code units that mirrors o200k's
//   pre-tokenizer (letter runs split at lower->Upper, digits in threes, punctuation runs, one
//   leading space or punctuation mark joining the next word) and prices each piece by what BPE
//   makes of pieces of that kind and length on real tool catalogues. No regex, no allocation:
//   cheap enough for the daemon to run on every list change. docs/tokens.md has the design
//   and the measured error.
//
// Both measure toolDefinitionText(tool): the JSON a host receives for one tool.

/** The text a host receives for one tool: the tool object as listed, as JSON. */
export function toolDefinitionText(tool: object): string {
  return JSON.stringify(tool);
}

type Encoder = (text: string) => number;
let encoder: Promise<Encoder> | undefined;

/**
 * The exact o200k_base token count of `text`. Loads gpt-tokenizer on the first call; special
 * tokens in the text (`<|endoftext|>` in a description) are counted as plain text, never refused.
 */
export async function countTokens(text: string): Promise<number> {
  encoder ??= import('gpt-tokenizer/encoding/o200k_base').then(
    (m) => (s: string) => m.countTokens(s, { allowedSpecial: new Set(), disallowedSpecial: new Set() }),
  );
  return (await encoder)(text);
}

// Character classes, by UTF-16 code unit. Everything outside ASCII counts as a letter: most of
// it is (accents, CJK, Cyrillic), and what is not (emoji, symbols) costs about as much.
const UPPER = 1;
const LOWER = 2;
const DIGIT = 3;
const SPACE = 4;
const NEWLINE = 5;
const PUNCT = 6;

const ASCII = new Uint8Array(128);
for (let c = 0; c < 128; c++) {
  ASCII[c] =
    c >= 65 && c <= 90 ? UPPER
    : c >= 97 && c <= 122 ? LOWER
    : c >= 48 && c <= 57 ? DIGIT
    : c === 10 || c === 13 ? NEWLINE
    : c === 32 || c === 9 || c === 11 || c === 12 ? SPACE
    : PUNCT;
}

function classOf(c: number): number {
  return c < 128 ? ASCII[c]! : LOWER;
}

// Prices per piece, calibrated on the catalogues in bench/surface/token-estimate.mjs: o200k
// knows almost every English word and identifier part of up to eight letters as one token;
// longer ones split about every six letters. Punctuation runs of up to three marks (`":"`,
// `"},"`) are one token; longer ones (`"}}},"`) about one per two marks. Outside ASCII, about
// one token per code unit beyond the first (CJK, emoji halves), fewer for accented Latin.
// A word joined by `/`, `-` or `+` splits from it about half the time.

function letterCost(ascii: number, other: number): number {
  const n = ascii + other;
  const base = n <= 4 ? 1 : n <= 8 ? 1.06 : n <= 11 ? 1.3 : n / 6;
  return other === 0 ? base : Math.max(base, other * 0.75);
}

/** Path and kebab-case joins (`/draft`, `-server`, `+get`) split off more often than `.x` or `_x`. */
function joinCost(mark: number, letters: number): number {
  if (mark !== 47 /* / */ && mark !== 45 /* - */ && mark !== 43 /* + */) return 0;
  return letters <= 4 ? 0.15 : 0.45;
}

function punctCost(n: number): number {
  return n <= 3 ? 1 : n === 4 ? 1.3 : n * 0.5 - 0.4;
}

/**
 * An estimate of the o200k_base token count of `text`, within 10 % of countTokens on tool
 * definition JSON (measured in bench/surface/token-estimate.mjs and test/tokens.test.ts).
 */
export function estimateTokens(text: string): number {
  const len = text.length;
  let tokens = 0;
  let joined = 0; // the lone mark that joined the word that follows (0: none, or a space)
  let i = 0;
  while (i < len) {
    const k = classOf(text.charCodeAt(i));
    if (k === UPPER || k === LOWER) {
      // Upper* Lower*: "inputSchema" is two pieces, "HTTPServer" one, "JSON" one.
      let ascii = 0;
      let other = 0;
      while (i < len && classOf(text.charCodeAt(i)) === UPPER) (ascii++, i++);
      while (i < len) {
        const c = text.charCodeAt(i);
        if (classOf(c) !== LOWER) break;
        if (c < 128) ascii++;
        else other++;
        i++;
      }
      tokens += letterCost(ascii, other) + joinCost(joined, ascii + other);
      joined = 0;
    } else if (k === DIGIT) {
      let n = 0;
      while (i < len && classOf(text.charCodeAt(i)) === DIGIT) (n++, i++);
      tokens += Math.ceil(n / 3);
    } else if (k === NEWLINE) {
      // Line breaks are one piece; the indentation after them is the next (spaces, below).
      while (i < len && classOf(text.charCodeAt(i)) === NEWLINE) i++;
      tokens += 1;
    } else {
      // A run of spaces and punctuation. One space, or one lone mark, before a word joins it.
      let spaces = 0;
      while (i < len && classOf(text.charCodeAt(i)) === SPACE) (spaces++, i++);
      let marks = 0;
      while (i < len && classOf(text.charCodeAt(i)) === PUNCT) (marks++, i++);
      const next = i < len ? classOf(text.charCodeAt(i)) : 0;
      const word = next === UPPER || next === LOWER;
      if (marks === 0) {
        // Spaces alone: before a line break they join it; else all but the last are one piece,
        // and the last joins a word or stands alone.
        if (next === NEWLINE) continue;
        if (spaces > 1) tokens += 1;
        if (!word) tokens += 1;
      } else {
        if (spaces > 1) tokens += 1;
        if (marks === 1 && spaces === 0 && word) joined = text.charCodeAt(i - 1);
        else tokens += punctCost(marks);
      }
    }
  }
  return Math.round(tokens);
}
