// A speech recogniser behind an OpenAI-compatible `POST /v1/audio/transcriptions`, for the voice
// tests: the uploaded audio (whatever the browser recorded: WebM/Opus, MP4) is decoded to 16 kHz
// mono PCM by Debian's `ffmpeg` and recognised offline by Debian's `pocketsphinx` with its US
// English model (`pocketsphinx-en-us`): real speech recognition, no weights fetched at run time.
// Its open vocabulary hears espeak-ng's synthetic voice poorly once a browser has compressed it,
// so it listens with a grammar of the few sentences below (JSGF): which of them was said is still
// decided from the sound alone. The multipart body is read by Node's own `Response.formData()`.
// Every request is recorded.

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** What the recogniser can hear: one of these sentences (or nothing). */
export const SENTENCES = [
  'what is the weather like today',
  'please open the door',
  'turn on the kitchen light',
  'tell me a joke about cats',
  'remind me to call my mother',
];

/** Runs `program` to its end; resolves with its stdout, rejects with its stderr. */
function run(program, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${program} exited ${code}: ${err.slice(-2000)}`))));
  });
}

/** The words pocketsphinx hears in `audio` (any container ffmpeg reads). */
export async function recognise(audio) {
  const dir = mkdtempSync(path.join(tmpdir(), 'iris-recognise-'));
  try {
    const input = path.join(dir, 'input');
    const wav = path.join(dir, 'speech.wav');
    const grammar = path.join(dir, 'sentences.gram');
    writeFileSync(input, audio);
    writeFileSync(grammar, `#JSGF V1.0;\ngrammar notes;\npublic <s> = ${SENTENCES.join(' | ')};\n`);
    await run('ffmpeg', ['-loglevel', 'error', '-y', '-i', input, '-ar', '16000', '-ac', '1', '-f', 'wav', wav]);
    const text = await run('pocketsphinx_continuous', ['-infile', wav, '-jsgf', grammar, '-logfn', '/dev/null']);
    return text.replace(/\s+/g, ' ').trim();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Starts the recogniser on a loopback port (`port`, else a free one): `{ url, requests, close }`. */
export async function startRecognizer(port = 0) {
  const requests = [];
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    const record = { method: req.method, path: req.url, authorization: req.headers.authorization || null };
    requests.push(record);
    const answer = (status, value) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    if (req.method !== 'POST' || req.url !== '/v1/audio/transcriptions') return answer(404, { error: { message: 'not found' } });
    try {
      const form = await new Response(body, { headers: { 'content-type': req.headers['content-type'] || '' } }).formData();
      const file = form.get('file');
      record.model = form.get('model');
      record.filename = file && file.name;
      record.type = file && file.type;
      const bytes = file ? Buffer.from(await file.arrayBuffer()) : Buffer.alloc(0);
      record.size = bytes.length;
      record.head = bytes.subarray(0, 4).toString('hex');
      record.text = await recognise(bytes);
      answer(200, { text: record.text });
    } catch (e) {
      record.error = String(e.message || e);
      answer(400, { error: { message: record.error } });
    }
  });
  await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
  const bound = server.address().port;
  return {
    url: `http://127.0.0.1:${bound}/v1/audio/transcriptions`,
    requests,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}
