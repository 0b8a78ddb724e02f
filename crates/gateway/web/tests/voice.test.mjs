//! Voice notes in Iris Web with real audio, end to end: a sentence spoken into a WAV file by
//! Debian's `espeak-ng` is Chromium's (fake) microphone; the phone records it with the microphone
//! button, the note is uploaded and transcribed by a real offline recogniser (pocketsphinx behind
//! an OpenAI-compatible endpoint, recognizer.mjs), the demo agent answers the transcript, and a
//! second device shows the note, plays it and shows its transcript. A gateway without
//! transcription offers no microphone; a failed transcription is shown with Retry, which works
//! once the recogniser is back.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { chromium } from 'playwright-core';

import {
  DESKTOP, Gateway, PHONE, chromiumPath, newDevice, openSignedIn, pageErrors, shot,
} from './harness.mjs';
import { SENTENCES, startRecognizer } from './recognizer.mjs';

const SENTENCE = SENTENCES[0];
const KEY = 'transcribe-key-0123456789';

const here = mkdtempSync(path.join(tmpdir(), 'iris-voice-'));
const speech = path.join(here, 'speech.wav');
let browser = null;
let recognizer = null;
const cleanups = [];

before(async () => {
  // The sentence after 1.5 s of silence (the recorder is running by then), then a second of
  // silence; the fake microphone plays it once from the start of each capture.
  const said = path.join(here, 'said.wav');
  execFileSync('espeak-ng', ['-v', 'en-us', '-s', '140', '-a', '70', '-w', said, SENTENCE]);
  execFileSync('ffmpeg', ['-loglevel', 'error', '-y', '-i', said, '-af', 'adelay=1500,apad=pad_dur=1', speech]);
  browser = await chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--autoplay-policy=no-user-gesture-required',
      '--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream', `--use-file-for-fake-audio-capture=${speech}%noloop`,
    ],
    timeout: 30000,
  });
  recognizer = await startRecognizer();
});

after(async () => {
  for (const fn of cleanups.reverse()) await fn().catch(() => {});
  if (browser) await browser.close();
  if (recognizer) await recognizer.close();
  rmSync(here, { recursive: true, force: true });
});

async function gateway(config) {
  const gw = await new Gateway({ config }).start();
  cleanups.push(() => gw.dispose());
  return gw;
}

async function device(viewport) {
  const d = await newDevice(browser, viewport);
  cleanups.push(() => d.context.close());
  return d;
}

const voiceConfig = (url) => `[voice]\ntranscribe_url = "${url}"\nmodel = "pocketsphinx-en-us"\nkey = "${KEY}"\ntimeout_secs = 60\n`;

/** Records with the microphone button until the timer says `seconds`, then sends. */
async function recordAndSend(page, seconds) {
  await page.getByRole('button', { name: 'Record a voice note' }).click();
  const bar = page.getByRole('status', { name: 'Recording a voice note' });
  await bar.waitFor();
  await page.waitForFunction((s) => {
    const [m, sec] = document.getElementById('record-time').textContent.split(':').map(Number);
    return m * 60 + sec >= s;
  }, seconds, { timeout: 30000 });
  await bar.getByRole('button', { name: 'Send' }).click();
  await bar.waitFor({ state: 'hidden' });
}

describe('voice notes', { timeout: 300000 }, () => {
  test('a spoken sentence is recorded, transcribed, answered and shown on a second device', { timeout: 180000 }, async () => {
    const gw = await gateway(voiceConfig(recognizer.url));
    const phone = (await device(PHONE)).page;
    const desk = (await device(DESKTOP)).page;
    await openSignedIn(phone, gw.url);
    await openSignedIn(desk, gw.url);

    await recordAndSend(phone, 5);
    const note = phone.locator('.msg.role-user').filter({ has: phone.locator('.voice-note') });
    await note.waitFor();
    const transcript = note.getByLabel('Transcript');
    await transcript.waitFor({ timeout: 60000 }).catch((e) => {
      throw new Error(`no transcript: ${e.message}; the recogniser got ${JSON.stringify(recognizer.requests)}`);
    });
    const heard = (await transcript.textContent()).trim();
    assert.equal(heard, SENTENCE, 'pocketsphinx heard the sentence spoken');
    // The agent got the transcript as the prompt.
    const answer = phone.locator('.msg.role-assistant:not(.streaming)', { hasText: `Echo: ${heard}` });
    await answer.waitFor();
    assert.doesNotMatch(await answer.textContent(), /Received file/, 'the agent got the transcript, not a file it cannot hear');
    await shot(phone, 'voice-note-phone');

    const request = recognizer.requests.at(-1);
    assert.equal(request.model, 'pocketsphinx-en-us');
    assert.equal(request.authorization, `Bearer ${KEY}`);
    assert.match(request.type, /^audio\/(webm|mp4)/);
    assert.ok(request.size > 4000, `a real recording: ${request.size} bytes`);

    // The second device: the note, its transcript, the answer; it plays.
    const there = desk.locator('.msg.role-user').filter({ has: desk.locator('.voice-note') });
    await there.getByLabel('Transcript').filter({ hasText: heard }).waitFor();
    await desk.locator('.msg.role-assistant:not(.streaming)', { hasText: `Echo: ${heard}` }).waitFor();
    await there.getByRole('button', { name: /^Play/ }).click();
    const audio = there.locator('audio');
    await audio.waitFor();
    await audio.evaluate((a) => (a.readyState >= 1 ? null : new Promise((resolve, reject) => {
      a.addEventListener('loadedmetadata', resolve, { once: true });
      a.addEventListener('error', () => reject(new Error(`the note does not play: ${a.error && a.error.code}`)), { once: true });
    })));
    await shot(desk, 'voice-note-desktop');

    // After a reload the transcript is still there (history).
    await desk.reload();
    await desk.locator('.msg.role-user .voice-transcript blockquote', { hasText: heard }).waitFor();
    assert.deepEqual(pageErrors(phone), []);
    assert.deepEqual(pageErrors(desk), []);
  });

  test('a failed transcription is shown with Retry, which succeeds later; no recogniser, no microphone', { timeout: 180000 }, async () => {
    // A recogniser that is not there yet: the port of one that was closed.
    const gone = await startRecognizer();
    const url = gone.url;
    await gone.close();
    const gw = await gateway(`${voiceConfig(url)}`);
    const phone = (await device(PHONE)).page;
    await openSignedIn(phone, gw.url);
    await recordAndSend(phone, 5);
    const note = phone.locator('.msg.role-user').filter({ has: phone.locator('.voice-note') });
    const failed = note.locator('.voice-transcript.state-failed');
    await failed.waitFor({ timeout: 60000 });
    assert.match(await failed.textContent(), /Not transcribed/);
    await shot(phone, 'voice-note-failed');
    assert.equal(await phone.locator('.msg.role-assistant').count(), 0, 'the agent got nothing');

    // The recogniser is back: Retry transcribes the same note and the agent answers it.
    const back = await startRecognizer(Number(new URL(url).port));
    cleanups.push(() => back.close());
    await failed.getByRole('button', { name: 'Retry' }).click();
    const transcript = note.getByLabel('Transcript');
    await transcript.waitFor({ timeout: 60000 });
    const heard = (await transcript.textContent()).trim();
    assert.equal(heard, SENTENCE);
    await phone.locator('.msg.role-assistant:not(.streaming)', { hasText: `Echo: ${heard}` }).waitFor();
    assert.equal(back.requests.length, 1);

    const plain = await gateway(null);
    const other = (await device(DESKTOP)).page;
    await openSignedIn(other, plain.url);
    assert.equal(await other.getByRole('button', { name: 'Record a voice note' }).isVisible(), false);
    assert.deepEqual(pageErrors(phone), []);
    assert.deepEqual(pageErrors(other), []);
  });
});
