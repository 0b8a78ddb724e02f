//! Read aloud in Iris Web, against the real gateway and its demo agent (which echoes the prompt as
//! Markdown): an answer's "Read aloud" hands its prose to the browser's speech synthesis — the
//! code block and the formula in it are not read — and turns into "Stop reading" until the speech
//! ends or is stopped; "Read answers aloud" in the top-bar menu reads each answer that completes
//! in that chat while it is open, kept over a reload, and never reads old answers again.
//!
//! Chromium's synthesis is replaced by a recorder before the page loads: what the test checks is
//! what the page asks the browser to say (headless Chromium has no voices to hear).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, browserSuite, openSignedIn, pageErrors, send, shot, waitOnline,
} from './harness.mjs';

const suite = browserSuite(before, after);

/** Records utterances instead of speaking them; `__finish()` ends what was queued. */
function recordSpeech() {
  const queued = [];
  window.__spoken = [];
  window.__cancels = 0;
  const synth = {
    speaking: false,
    pending: false,
    paused: false,
    speak(u) {
      window.__spoken.push(u.text);
      queued.push(u);
      this.speaking = true;
    },
    cancel() {
      window.__cancels += 1;
      for (const u of queued.splice(0)) if (u.onerror) u.onerror({ error: 'interrupted' });
      this.speaking = false;
    },
    pause() {},
    resume() {},
    getVoices: () => [],
    addEventListener() {},
    removeEventListener() {},
  };
  window.__finish = () => {
    for (const u of queued.splice(0)) if (u.onend) u.onend({});
    synth.speaking = false;
  };
  Object.defineProperty(window, 'speechSynthesis', { value: synth, configurable: true });
}

const PROMPT = 'Read this sentence.\n\n```js\nconst secret = 42;\n```\n\nThe formula $e^{i\\pi}$ is skipped. The end.';
const answerOf = (page, text) => page.locator('.msg.role-assistant:not(.streaming)', { hasText: text });
const spoken = (page) => page.evaluate(() => window.__spoken.slice());

describe('read aloud', { timeout: 240000 }, () => {
  test('an answer is read aloud without its code, and stops on a second press (desktop)', { timeout: 120000 }, async () => {
    const gw = await suite.gateway();
    const { page } = await suite.device(DESKTOP);
    await page.addInitScript(recordSpeech);
    await openSignedIn(page, gw.url);
    await send(page, PROMPT);
    const answer = answerOf(page, 'The end.');
    await answer.locator('.code-block').waitFor();
    await answer.hover();
    const button = answer.getByRole('button', { name: 'Read aloud' });
    await button.click();
    const said = (await spoken(page)).join(' ');
    assert.match(said, /^Echo: Read this sentence\./);
    assert.match(said, /The end\.$/);
    assert.doesNotMatch(said, /secret|const|\\pi|Copy/, said);
    const stop = answer.getByRole('button', { name: 'Stop reading' });
    assert.equal(await stop.getAttribute('aria-pressed'), 'true');
    await shot(page, 'speak-reading-desktop');
    await page.evaluate(() => window.__finish());
    await answer.getByRole('button', { name: 'Read aloud' }).waitFor();

    // A second press while it reads stops it.
    await answer.getByRole('button', { name: 'Read aloud' }).click();
    const cancels = await page.evaluate(() => window.__cancels);
    await answer.getByRole('button', { name: 'Stop reading' }).click();
    await answer.getByRole('button', { name: 'Read aloud' }).waitFor();
    assert.ok(await page.evaluate(() => window.__cancels) > cancels, 'the speech was cancelled');
    // A user message offers nothing to read.
    const mine = page.locator('.msg.role-user', { hasText: 'Read this sentence.' });
    assert.equal(await mine.getByRole('button', { name: 'Read aloud' }).count(), 0);
    assert.deepEqual(pageErrors(page), []);
  });

  test('a chat set to read answers aloud reads each new answer, not old ones after a reload (phone)', { timeout: 120000 }, async () => {
    const gw = await suite.gateway();
    const { page } = await suite.device(PHONE);
    await page.addInitScript(recordSpeech);
    await openSignedIn(page, gw.url);
    await send(page, 'Before the switch.');
    await answerOf(page, 'Echo: Before the switch.').waitFor();
    assert.deepEqual(await spoken(page), [], 'nothing is read unasked');

    await page.getByRole('button', { name: 'Menu' }).click();
    const item = page.getByRole('menuitemcheckbox', { name: 'Read answers aloud' });
    assert.equal(await item.getAttribute('aria-checked'), 'false');
    await item.click();
    await send(page, 'After the switch.');
    await answerOf(page, 'Echo: After the switch.').waitFor();
    await page.waitForFunction(() => window.__spoken.length > 0);
    assert.deepEqual(await spoken(page), ['Echo: After the switch.']);
    await page.evaluate(() => window.__finish());

    // The message menu reads an older answer too.
    const older = answerOf(page, 'Echo: Before the switch.');
    await older.getByRole('button', { name: 'Message actions' }).click();
    await page.getByRole('menuitem', { name: 'Read aloud' }).click();
    assert.deepEqual((await spoken(page)).slice(1), ['Echo: Before the switch.']);
    await page.evaluate(() => window.__finish());

    // Kept over a reload; the answers already there are not read again.
    await page.reload();
    await waitOnline(page);
    await answerOf(page, 'Echo: After the switch.').waitFor();
    await page.getByRole('button', { name: 'Menu' }).click();
    assert.equal(await item.getAttribute('aria-checked'), 'true');
    await page.keyboard.press('Escape');
    await send(page, 'Third one.');
    await answerOf(page, 'Echo: Third one.').waitFor();
    await page.waitForFunction(() => window.__spoken.length > 0);
    assert.deepEqual(await spoken(page), ['Echo: Third one.']);

    // Switched off: the next answer is not read.
    await page.getByRole('button', { name: 'Menu' }).click();
    await item.click();
    await send(page, 'Fourth one.');
    await answerOf(page, 'Echo: Fourth one.').waitFor();
    assert.deepEqual(await spoken(page), ['Echo: Third one.']);
    assert.deepEqual(pageErrors(page), []);
  });
});
