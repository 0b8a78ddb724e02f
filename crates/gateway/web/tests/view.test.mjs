// The transcript view of Iris Web, at phone and desktop size, against the real gateway and its
// demo agent: following the end and the "new messages" marker, date separators, the unread count
// in the tab title, drag-and-drop upload, the image lightbox and downloads, the empty state, and
// the look of answers that did not complete. Screenshots land in artifacts/.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, browserSuite, newChat, noisePng, openSignedIn, pageErrors, send, shot, waitOnline,
} from './harness.mjs';

const suite = browserSuite(before, after);
const SIZES = [['phone', PHONE], ['desktop', DESKTOP]];
const DAY_MS = 86400000;

const assistant = (page, text) => page.locator('.msg.role-assistant:not(.streaming)', { hasText: text });
const userMsg = (page, text) => page.locator('.msg.role-user', { hasText: text });

/** Sends and waits for the demo agent's echo. */
async function exchange(page, text) {
  await send(page, text);
  await assistant(page, `Echo: ${text.split('\n')[0]}`).waitFor();
}

/**
 * Drops `files` ([name, type, bytes]) on the transcript of `page` and waits for their uploads;
 * `whileShown` runs while the drop zone is up.
 */
async function dropFiles(page, files, whileShown = async () => {}) {
  const dt = await page.evaluateHandle((list) => {
    const t = new DataTransfer();
    for (const [name, type, bytes] of list) t.items.add(new File([new Uint8Array(bytes)], name, { type }));
    return t;
  }, files.map(([name, type, bytes]) => [name, type, [...bytes]]));
  await page.locator('#scroller').dispatchEvent('dragenter', { dataTransfer: dt });
  const zone = page.locator('#dropzone', { hasText: 'Drop files to attach them' });
  await zone.waitFor();
  await whileShown();
  await page.locator('#scroller').dispatchEvent('drop', { dataTransfer: dt });
  await zone.waitFor({ state: 'hidden' });
  for (const [name] of files) await page.locator('#tray .attachment[data-state=done]', { hasText: name }).waitFor({ timeout: 30000 });
}

/** The distance of the scroller from its end, in pixels. */
function fromEnd(page) {
  return page.locator('#scroller').evaluate((s) => s.scrollHeight - s.scrollTop - s.clientHeight);
}

/** Opens the chat list when it is a drawer (phone size). */
async function openChatList(page) {
  const toggle = page.getByRole('button', { name: 'Open the chat list' });
  if (await toggle.isVisible() && await toggle.getAttribute('aria-expanded') !== 'true') await toggle.click();
}

async function showChat(page, name) {
  await openChatList(page);
  await page.locator('li[data-chat] .chan', { hasText: name }).click();
  await page.locator('#lane-title', { hasText: name }).waitFor();
}

/** What the lane shown holds, top to bottom: separators and messages. */
function laneOutline(page) {
  return page.locator('#log .lane').evaluate((lane) => [...lane.children].map((el) => {
    if (el.classList.contains('day-sep')) return `— ${el.textContent} —`;
    if (el.classList.contains('msg')) return `${el.dataset.role}: ${el.querySelector('.body').textContent.trim()}`;
    return el.className;
  }));
}

describe('the transcript view', { timeout: 600000 }, () => {
  for (const [size, viewport] of SIZES) {
    test(`scrolled up, new messages are marked and a button goes to the end; at the end the view follows (${size})`, { timeout: 120000 }, async () => {
      const gw = await suite.gateway();
      const { page } = await suite.device(viewport);
      const other = await suite.device(DESKTOP);
      await openSignedIn(page, gw.url);
      await openSignedIn(other.page, gw.url);

      const tall = (n) => `note ${n}\n\n${Array.from({ length: 8 }, (_, i) => `line ${i + 1} of note ${n}`).join('\n\n')}`;
      for (let n = 1; n <= 4; n++) await exchange(page, tall(n));
      await page.waitForFunction(() => {
        const s = document.getElementById('scroller');
        return s.scrollHeight > s.clientHeight * 1.5 && s.scrollHeight - s.scrollTop - s.clientHeight < 2;
      });
      assert.ok(await page.locator('#to-bottom').isHidden(), 'no button at the end');

      // At the end, what another device sends is followed.
      await exchange(other.page, 'from the other device');
      await assistant(page, 'Echo: from the other device').waitFor();
      await page.waitForFunction(() => {
        const s = document.getElementById('scroller');
        return s.scrollHeight - s.scrollTop - s.clientHeight < 2;
      });
      assert.equal(await page.locator('.new-divider').count(), 0);

      // At the end, a picture that grows its message once loaded keeps the end in view.
      await dropFiles(other.page, [['tall.png', 'image/png', noisePng(300, 900)]]);
      await send(other.page, 'a tall picture');
      const picture = userMsg(page, 'a tall picture').locator('img.inline-image');
      await page.waitForFunction((el) => el.complete && el.naturalWidth === 300, await picture.elementHandle());
      await page.waitForFunction(() => {
        const s = document.getElementById('scroller');
        return s.scrollHeight - s.scrollTop - s.clientHeight < 2;
      });
      assert.ok((await picture.boundingBox()).height > 300, 'the picture is drawn at its height');

      // Scrolled up, new messages stay below, marked and counted.
      await page.locator('#scroller').evaluate((s) => { s.scrollTop = 0; });
      const button = page.getByRole('button', { name: /^Scroll to the latest messages/ });
      await button.waitFor();
      await exchange(other.page, 'while you read');
      await assistant(page, 'Echo: while you read').waitFor();
      assert.equal(await page.locator('#scroller').evaluate((s) => s.scrollTop), 0, 'the view stays where the user reads');
      await page.locator('#to-bottom .new-count', { hasText: '2' }).waitFor();
      assert.equal(await button.getAttribute('aria-label'), 'Scroll to the latest messages, 2 new');
      const next = await page.locator('.new-divider + .msg').evaluate((el) => el.textContent);
      assert.match(next, /while you read/, 'the marker is above the first new message');
      await page.locator('#scroller').evaluate((s) => { s.scrollTop = s.scrollHeight - s.clientHeight - 400; });
      await shot(page, `new-messages-${size}`);

      await button.click();
      await page.waitForFunction(() => {
        const s = document.getElementById('scroller');
        return s.scrollHeight - s.scrollTop - s.clientHeight < 2;
      });
      await button.waitFor({ state: 'hidden' });
      assert.equal(await page.locator('.new-divider').count(), 0, 'the marker is cleared');
      assert.ok(await fromEnd(page) < 2);
      assert.deepEqual(pageErrors(page), []);
    });

    test(`date separators split history by day: a date, Yesterday, Today (${size})`, { timeout: 120000 }, async () => {
      const gw = await suite.gateway();
      const first = await suite.device(DESKTOP);
      await openSignedIn(first.page, gw.url);
      for (const text of ['three days ago', 'yesterday evening', 'this morning']) await exchange(first.page, text);

      // Age the stored messages: the first exchange by three days, the second by one.
      await gw.stop();
      const db = path.join(gw.dir, 'data', 'iris.db');
      execFileSync('sqlite3', [db, `
        UPDATE messages SET ts = ts - ${3 * DAY_MS} WHERE seq IN (SELECT seq FROM messages ORDER BY seq LIMIT 2);
        UPDATE messages SET ts = ts - ${DAY_MS} WHERE seq IN (SELECT seq FROM messages ORDER BY seq LIMIT 2 OFFSET 2);`]);
      await gw.start();

      const { page } = await suite.device(viewport);
      await openSignedIn(page, gw.url);
      await assistant(page, 'Echo: this morning').waitFor();
      const longAgo = await page.evaluate((ts) => new Date(ts).toLocaleDateString([], { weekday: 'long', day: 'numeric', month: 'long', year: new Date(ts).getFullYear() === new Date().getFullYear() ? undefined : 'numeric' }), Date.now() - 3 * DAY_MS);
      assert.deepEqual(await laneOutline(page), [
        `— ${longAgo} —`, 'user: three days ago', 'assistant: Echo: three days ago',
        '— Yesterday —', 'user: yesterday evening', 'assistant: Echo: yesterday evening',
        '— Today —', 'user: this morning', 'assistant: Echo: this morning',
      ]);
      await exchange(page, 'and now');
      assert.equal(await page.locator('.day-sep').count(), 3, 'a new message of today adds no separator');
      // Days are calendar days in local time: a minute before midnight is yesterday, and a date
      // of another year names the year.
      const labels = await page.evaluate(async () => {
        const { dayLabel } = await import('./assets/view.js');
        const now = new Date(2027, 0, 2, 0, 30).getTime();
        return [new Date(2027, 0, 2, 0, 1), new Date(2027, 0, 1, 23, 59), new Date(2026, 11, 28, 12)].map((d) => dayLabel(d.getTime(), now));
      });
      assert.deepEqual(labels.slice(0, 2), ['Today', 'Yesterday']);
      assert.match(labels[2], /December.*2026|2026.*December/);
      await page.locator('#scroller').evaluate((s) => { s.scrollTop = 0; });
      await shot(page, `date-separators-${size}`);
      assert.deepEqual(pageErrors(page), []);
    });

    test(`the tab title counts unread messages in other chats and while the page is hidden (${size})`, { timeout: 120000 }, async () => {
      const gw = await suite.gateway();
      const { page } = await suite.device(viewport);
      const other = await suite.device(DESKTOP);
      await openSignedIn(page, gw.url);
      await openSignedIn(other.page, gw.url);
      await exchange(page, 'hello');
      assert.equal(await page.title(), 'Default · Iris');

      // In another chat: what arrives in Default is counted.
      await newChat(page, 'Elsewhere');
      await exchange(other.page, 'are you there');
      // The answer counts; the question, one's own from another device, does not.
      await page.waitForFunction(() => document.title === '(1) Elsewhere · Iris');
      await showChat(page, 'Default');
      await assistant(page, 'Echo: are you there').waitFor();
      assert.equal(await page.title(), 'Default · Iris', 'read once the chat is shown');

      // The page hidden, as when another tab is in front (headless Chromium keeps every tab
      // visible, so the page is told so the way the browser tells it): what arrives is counted.
      const setHidden = (hidden) => page.evaluate((h) => {
        Object.defineProperty(document, 'hidden', { configurable: true, get: () => h });
        Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => (h ? 'hidden' : 'visible') });
        document.dispatchEvent(new Event('visibilitychange'));
      }, hidden);
      await setHidden(true);
      await exchange(other.page, 'while the tab is away');
      await page.waitForFunction(() => document.title === '(1) Default · Iris');
      await setHidden(false);
      await page.waitForFunction(() => document.title === 'Default · Iris');
      // Seen now: the other device shows the answer read.
      await userMsg(other.page, 'while the tab is away').locator('.ticks', { hasText: '✓✓' }).waitFor();
      assert.deepEqual(pageErrors(page), []);
    });

    test(`files dropped on the conversation are attached; an image opens full size, a file downloads under its name (${size})`, { timeout: 120000 }, async () => {
      const gw = await suite.gateway();
      const { page } = await suite.device(viewport);
      await openSignedIn(page, gw.url);

      await dropFiles(page, [
        ['dropped.png', 'image/png', noisePng(640, 480)],
        ['notes.txt', 'text/plain', Buffer.from('a note that was dropped\n')],
      ], () => shot(page, `drop-zone-${size}`));
      await send(page, 'two dropped files');
      await assistant(page, 'Echo: two dropped files').waitFor();

      // The image: a button that opens it full size; Esc and a click outside close it.
      const open = userMsg(page, 'two dropped files').getByRole('button', { name: 'View dropped.png full size' });
      await page.waitForFunction((el) => el.complete && el.naturalWidth > 0, await open.locator('img').elementHandle());
      await open.click();
      const box = page.locator('dialog#lightbox[open]');
      await box.waitFor();
      const big = box.locator('img.lightbox-image');
      await page.waitForFunction((el) => el.complete && el.naturalWidth === 640, await big.elementHandle());
      const small = await open.locator('img').boundingBox();
      const full = await big.boundingBox();
      assert.ok(full.width > small.width, `shown larger than in the message (${full.width} > ${small.width})`);
      await shot(page, `lightbox-${size}`);
      await page.keyboard.press('Escape');
      await box.waitFor({ state: 'detached' });
      assert.ok(await open.evaluate((el) => el === document.activeElement), 'focus is back on the image');
      await open.click();
      await box.waitFor();
      await page.mouse.click(8, viewport.height - 8);
      await box.waitFor({ state: 'detached' });
      assert.ok(await open.evaluate((el) => el === document.activeElement), 'focus is back on the image');

      // The file: downloaded under its own name.
      const chip = userMsg(page, 'two dropped files').locator('.file-chip', { hasText: 'notes.txt' });
      const [download] = await Promise.all([page.waitForEvent('download'), chip.getByRole('button', { name: 'Download' }).click()]);
      assert.equal(download.suggestedFilename(), 'notes.txt');
      assert.equal(readFileSync(await download.path(), 'utf8'), 'a note that was dropped\n');
      assert.deepEqual(pageErrors(page), []);
    });

    test(`a chat without messages says what to do, with the demo agent's keywords only for the demo agent (${size})`, { timeout: 120000 }, async () => {
      const gw = await suite.gateway();
      const { page } = await suite.device(viewport);
      await openSignedIn(page, gw.url);
      const empty = page.getByRole('region', { name: 'Empty chat' });
      await empty.getByRole('heading', { name: 'No messages yet' }).waitFor();
      await empty.getByText('Type a message below').waitFor();
      await empty.getByText('the demo agent').waitFor();
      for (const word of ['think', 'tool', 'approve', 'slow', 'mkimage']) await empty.getByRole('button', { name: word, exact: true }).waitFor();
      await shot(page, `empty-demo-${size}`);

      await empty.getByRole('button', { name: 'think', exact: true }).click();
      const box = page.getByRole('textbox', { name: 'Message' });
      assert.equal(await box.inputValue(), 'think ');
      assert.ok(await box.evaluate((el) => el === document.activeElement), 'the message box has the focus');
      await box.press('Enter');
      await assistant(page, 'Echo: think').waitFor();
      await empty.waitFor({ state: 'detached' });
      await page.locator('.msg.role-assistant details.reasoning').waitFor();

      // Another agent, or none: a neutral hint without the demo's keywords.
      const plain = await suite.gateway({ agent: 'none' });
      const second = await suite.device(viewport);
      await openSignedIn(second.page, plain.url);
      const hint = second.page.getByRole('region', { name: 'Empty chat' });
      await hint.getByText('Type a message below').waitFor();
      assert.equal(await hint.locator('.demo-keywords').count(), 0);
      assert.equal(await hint.getByText('demo agent').count(), 0);
      assert.deepEqual(pageErrors(page), []);
    });

    test(`stopped, failed and cut-off answers each look different from a complete one (${size})`, { timeout: 120000 }, async () => {
      const gw = await suite.gateway();
      const { page } = await suite.device(viewport);
      await openSignedIn(page, gw.url);

      await exchange(page, 'complete');
      // `bench`: ten seconds of chunks. (A `slow` answer ends after one second: on a busy
      // machine it could end before Stop or the kill landed, and nothing was stopped or cut off.)
      const streaming = page.locator('.msg.role-assistant.streaming .body', { hasText: /\d+ \d+ \d+/ });
      await send(page, 'bench 400 25000');
      await streaming.waitFor();
      await page.getByRole('button', { name: 'Stop' }).click();
      await page.locator('.msg.role-assistant[data-ended=stopped]:not(.streaming)').waitFor();
      await send(page, 'crash now');
      await page.locator('.msg.role-assistant[data-ended=agent_failed]').waitFor({ timeout: 30000 });
      await page.locator('#busy').waitFor({ state: 'hidden' });

      // The gateway killed in the middle of an answer: it is closed as cut off when it is back.
      await send(page, 'bench 400 25000');
      await streaming.waitFor();
      const exited = new Promise((r) => gw.proc.once('exit', r));
      gw.proc.kill('SIGKILL');
      await exited;
      await gw.start();
      await waitOnline(page);
      await page.locator('.msg.role-assistant[data-ended=cut_off]:not(.streaming)').waitFor({ timeout: 30000 });

      const looks = await page.locator('.msg.role-assistant:not(.streaming)').evaluateAll((els) => els.map((el) => {
        const s = getComputedStyle(el);
        return { ended: el.dataset.ended || 'completed', look: `${s.borderLeftStyle} ${s.borderLeftWidth} ${s.borderLeftColor} ${s.backgroundColor}`, mark: (el.querySelector('.ended') || {}).textContent || '' };
      }));
      const byEnd = Object.fromEntries(looks.map((l) => [l.ended, l]));
      assert.deepEqual(Object.keys(byEnd).sort(), ['agent_failed', 'completed', 'cut_off', 'stopped']);
      const distinct = new Set(Object.values(byEnd).map((l) => l.look));
      assert.equal(distinct.size, 4, `four different looks: ${JSON.stringify(byEnd)}`);
      assert.equal(byEnd.completed.mark, '');
      assert.match(byEnd.stopped.mark, /Stopped/);
      assert.match(byEnd.agent_failed.mark, /Agent failed/);
      assert.match(byEnd.cut_off.mark, /Cut off/);
      await page.locator('#scroller').evaluate((s) => { s.scrollTop = s.scrollHeight; });
      await shot(page, `ended-${size}`);
      assert.deepEqual(pageErrors(page), []);
    });
  }
});
