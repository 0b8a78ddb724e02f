//! Read aloud in the gateway's voice, against the real gateway (`[voice] speech_url`) and a fake
//! OpenAI-compatible speech endpoint on 127.0.0.1 that answers a tiny WAV: "Read aloud" asks the
//! gateway for a recording of the answer's prose (without its code block), pulls it and plays it
//! in an Audio element, asks for the next piece of a long answer while one plays, and "Stop
//! reading" stops the audio; when the server voice fails, the browser's synthesis reads instead.
//!
//! Playback and synthesis are replaced by recorders before the page loads: what the test checks is
//! what the page asks the browser to play or say (headless Chromium plays to no speaker).

import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';

import { DESKTOP, browserSuite, openSignedIn, pageErrors, send } from './harness.mjs';

const suite = browserSuite(before, after);
const KEY = 'sk-web-speech';

/** A tiny WAV file: a RIFF/WAVE header for 8 kHz mono 8-bit PCM, then 800 samples of silence. */
function wav() {
  const samples = 800;
  const b = Buffer.alloc(44 + samples, 0x80);
  b.write('RIFF', 0);
  b.writeUInt32LE(36 + samples, 4);
  b.write('WAVEfmt ', 8);
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20);
  b.writeUInt16LE(1, 22);
  b.writeUInt32LE(8000, 24);
  b.writeUInt32LE(8000, 28);
  b.writeUInt16LE(1, 32);
  b.writeUInt16LE(8, 34);
  b.write('data', 36);
  b.writeUInt32LE(samples, 40);
  return b;
}

/** The fake speech endpoint: records each request, answers the WAV or `status`. */
async function startFake() {
  const fake = { got: [], status: 200, waiters: [] };
  /** Resolves once `n` requests have arrived. */
  fake.requests = (n) => new Promise((resolve) => {
    fake.waiters.push({ n, resolve });
    fake.arrived();
  });
  fake.arrived = () => {
    fake.waiters = fake.waiters.filter((w) => (fake.got.length >= w.n ? (w.resolve(), false) : true));
  };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      fake.got.push({ url: req.url, auth: req.headers.authorization, body: JSON.parse(body || '{}') });
      fake.arrived();
      if (fake.status !== 200) {
        res.writeHead(fake.status, { 'content-type': 'application/json' });
        return res.end('{"error":"no"}');
      }
      res.writeHead(200, { 'content-type': 'audio/wav' });
      res.end(wav());
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `http://127.0.0.1:${server.address().port}/v1/audio/speech`;
  suite.cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return fake;
}

/** Records plays instead of playing; `__end()` ends the one playing. Records speech too. */
function recordPlayback() {
  window.__played = [];
  window.__paused = 0;
  window.__spoken = [];
  HTMLMediaElement.prototype.play = function play() {
    window.__played.push(this.src);
    window.__playing = this;
    return Promise.resolve();
  };
  HTMLMediaElement.prototype.pause = function pause() {
    window.__paused += 1;
  };
  window.__end = () => window.__playing.dispatchEvent(new Event('ended'));
  const synth = {
    speaking: false,
    pending: false,
    paused: false,
    speak(u) { window.__spoken.push(u.text); },
    cancel() {},
    pause() {},
    resume() {},
    getVoices: () => [],
    addEventListener() {},
    removeEventListener() {},
  };
  Object.defineProperty(window, 'speechSynthesis', { value: synth, configurable: true });
}

const PROMPT = 'Read this sentence.\n\n```js\nconst secret = 42;\n```\n\nThe end.';
const answerOf = (page, text) => page.locator('.msg.role-assistant:not(.streaming)', { hasText: text });
const played = (page) => page.evaluate(() => window.__played.slice());

async function open(fake) {
  const gw = await suite.gateway({ config: `[voice]\nspeech_url = "${fake.url}"\nkey = "${KEY}"\ntimeout_secs = 5\n` });
  const { page } = await suite.device(DESKTOP);
  await page.addInitScript(recordPlayback);
  await openSignedIn(page, gw.url);
  return page;
}

describe('read aloud in the server voice', { timeout: 240000 }, () => {
  test('an answer is read in the server voice without its code, and Stop reading stops it', { timeout: 120000 }, async () => {
    const fake = await startFake();
    const page = await open(fake);
    await send(page, PROMPT);
    const answer = answerOf(page, 'The end.');
    await answer.locator('.code-block').waitFor();
    await answer.hover();
    await answer.getByRole('button', { name: 'Read aloud' }).click();
    await page.waitForFunction(() => window.__played.length === 1);
    const [src] = await played(page);
    assert.match(src, /^blob:/, 'the pulled recording plays');
    assert.equal(fake.got.length, 1, JSON.stringify(fake.got));
    const { body, auth, url } = fake.got[0];
    assert.equal(url, '/v1/audio/speech');
    assert.equal(auth, `Bearer ${KEY}`);
    assert.match(body.input, /^Echo: Read this sentence\.\n/, 'one request for the short answer');
    assert.match(body.input, /The end\.$/);
    assert.doesNotMatch(body.input, /secret|const|Copy/, body.input);
    assert.deepEqual([body.model, body.voice, body.response_format], ['tts-1', 'alloy', 'mp3']);
    assert.deepEqual(await page.evaluate(() => window.__spoken), [], 'the browser voice is not used');

    const stop = answer.getByRole('button', { name: 'Stop reading' });
    assert.equal(await stop.getAttribute('aria-pressed'), 'true');
    await stop.click();
    await answer.getByRole('button', { name: 'Read aloud' }).waitFor();
    assert.ok(await page.evaluate(() => window.__paused) > 0, 'the audio was stopped');
    assert.deepEqual(pageErrors(page), []);
  });

  test('a long answer is read piece by piece, the next asked for while one plays', { timeout: 120000 }, async () => {
    const fake = await startFake();
    const page = await open(fake);
    const long = Array.from({ length: 30 }, (_, i) => `Sentence number ${i + 1} is here.`).join(' ');
    await send(page, long);
    const answer = answerOf(page, 'Sentence number 30 is here.');
    await answer.hover();
    await answer.getByRole('button', { name: 'Read aloud' }).click();
    await page.waitForFunction(() => window.__played.length === 1);
    // The second piece is asked for before the first ended.
    await fake.requests(2);
    assert.equal(await page.evaluate(() => window.__played.length), 1, 'the first still plays');
    assert.ok(fake.got.every((g) => g.body.input.length <= 600), 'pieces of at most 600 characters');
    assert.match(fake.got[0].body.input, /^Echo: Sentence number 1 is here\./);
    assert.match(fake.got[1].body.input, /Sentence number 30 is here\.$/);
    await page.evaluate(() => window.__end());
    await page.waitForFunction(() => window.__played.length === 2);
    await page.evaluate(() => window.__end());
    await answer.getByRole('button', { name: 'Read aloud' }).waitFor();
    assert.equal(fake.got.length, 2);
    assert.deepEqual(pageErrors(page), []);
  });

  test('a chat set to read answers aloud reads each new answer in the server voice', { timeout: 120000 }, async () => {
    const fake = await startFake();
    const page = await open(fake);
    await page.getByRole('button', { name: 'Menu' }).click();
    await page.getByRole('menuitemcheckbox', { name: 'Read answers aloud' }).click();
    await send(page, 'Read me when done.');
    await answerOf(page, 'Echo: Read me when done.').waitFor();
    await page.waitForFunction(() => window.__played.length === 1);
    assert.deepEqual(fake.got.map((g) => g.body.input), ['Echo: Read me when done.']);
    assert.deepEqual(await page.evaluate(() => window.__spoken), []);
    assert.deepEqual(pageErrors(page), []);
  });

  test('when the server voice fails the browser reads the answer, and says so', { timeout: 120000 }, async () => {
    const fake = await startFake();
    fake.status = 500;
    const page = await open(fake);
    await send(page, 'Fall back, please.');
    const answer = answerOf(page, 'Echo: Fall back, please.');
    await answer.hover();
    await answer.getByRole('button', { name: 'Read aloud' }).click();
    await page.waitForFunction(() => window.__spoken.length > 0);
    assert.deepEqual(await page.evaluate(() => window.__spoken), ['Echo: Fall back, please.']);
    assert.deepEqual(await played(page), []);
    await page.getByText(/server voice could not read the answer aloud \(the speech service failed \(HTTP 500\)\)/).waitFor();
    assert.deepEqual(pageErrors(page), []);
  });
});
