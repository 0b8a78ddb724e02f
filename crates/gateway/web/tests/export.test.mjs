//! Exporting a chat from Iris Web, at phone and desktop size, against the real gateway and its
//! demo agent: the chat's menu → "Export chat" downloads `<chat name>.md` holding every message
//! of the chat — more than the page has drawn, so older history pages are fetched — once each and
//! in order, each under its author and time, a tool step as a short line, and a file change as a
//! fenced diff.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, browserSuite, openSignedIn, pageErrors, send, waitOnline,
} from './harness.mjs';

const suite = browserSuite(before, after);
const SIZES = [['phone', PHONE], ['desktop', DESKTOP]];

/** Turns in the chat: 2 × TURNS + 2 messages, more than one history page (50) holds. */
const TURNS = 30;
/** A message whose Markdown would run a script or fetch a tracker if the export kept it. */
const HOSTILE = 'see <img src=x onerror=alert(1)> and [go](javascript:alert(2)) ![px](https://tracker.example/p.gif)';
const HARMLESS = 'see &lt;img src=x onerror=alert(1)&gt; and go (link removed) [px](<https://tracker.example/p.gif>)';
const note = (i) => `note ${String(i).padStart(2, '0')}`;

describe('export a chat', { timeout: 300000 }, () => {
  for (const [size, viewport] of SIZES) {
    test(`Export downloads every message of the chat, in order, as Markdown (${size})`, { timeout: 150000 }, async () => {
      const gw = await suite.gateway();
      const { page } = await suite.device(viewport);
      await openSignedIn(page, gw.url);
      // Each answer awaited before the next message: the chat alternates, message and answer.
      for (let i = 1; i <= TURNS; i++) {
        await send(page, note(i));
        await page.locator('.msg.role-assistant:not(.streaming)', { hasText: `Echo: ${note(i)}` }).waitFor();
      }
      await send(page, 'tool');
      await page.locator('.msg.role-assistant:not(.streaming)', { hasText: 'Echo: tool' }).waitFor();
      await send(page, HOSTILE);
      await page.locator('.msg.role-assistant:not(.streaming)', { hasText: 'Echo: see' }).waitFor();
      await send(page, 'edit');
      await page.locator('.msg.role-assistant:not(.streaming)', { hasText: 'Edited notes.txt.' }).waitFor();

      // A fresh load draws only the latest page.
      await page.reload();
      await waitOnline(page);
      await page.locator('.msg.role-assistant', { hasText: 'Edited notes.txt.' }).waitFor();
      const drawn = await page.locator('#log .msg').count();
      const total = 2 * TURNS + 6;
      assert.ok(drawn < total, `the page draws ${drawn} of ${total} messages`);

      await page.getByRole('button', { name: 'Menu' }).click();
      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.getByRole('menuitem', { name: 'Export chat' }).click(),
      ]);
      assert.equal(download.suggestedFilename(), 'Default.md');
      const text = readFileSync(await download.path(), 'utf8');
      const lines = text.split('\n');
      assert.equal(lines[0], '# Default');

      // Every message's text once, in order, each under "## You|Agent · YYYY-MM-DD HH:MM UTC".
      const expected = [];
      for (let i = 1; i <= TURNS; i++) expected.push(note(i), `Echo: ${note(i)}`);
      const headings = lines.filter((l) => l.startsWith('## '));
      assert.equal(headings.length, total, text);
      for (const [i, heading] of headings.entries()) {
        assert.match(heading, new RegExp(`^## ${i % 2 ? 'Agent' : 'You'} · \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d UTC$`));
      }
      let at = -1;
      for (const t of expected) {
        assert.equal(lines.filter((l) => l === t).length, 1, `"${t}" once`);
        const next = lines.indexOf(t);
        assert.ok(next > at, `"${t}" after the one before it`);
        at = next;
      }
      // The tool turn: its tool call as a short line between the prompt and the answer's text.
      const tool = lines.indexOf('- Tool terminal: `echo hello` (ok)');
      assert.ok(tool > lines.indexOf('tool') && tool < lines.indexOf('Echo: tool') && tool > at, text.slice(-600));
      // The edit's change as a fenced diff, between its prompt and its answer.
      const changed = lines.findIndex((l) => /^Changed `.*\/notes\.txt` \(\+2 −1\):$/.test(l));
      const answered = lines.findIndex((l) => l.startsWith('Edited notes.txt.'));
      assert.ok(changed > lines.indexOf('edit') && changed < answered, text.slice(-900));
      const block = lines.slice(changed + 2, lines.indexOf('```', changed + 3) + 1);
      assert.equal(block[0], '```diff', text.slice(-900));
      assert.ok(block.includes('+four') && block.includes('-two') && block.includes('+2'), block.join('\n'));
      assert.ok(!text.includes('completed'), 'complete answers carry no ending mark');
      assert.deepEqual(lines.filter((l) => l.includes('tracker.example')), [HARMLESS, `Echo: ${HARMLESS}`], text.slice(-900));
      assert.ok(!/<img|\]\(javascript:|!\[/i.test(text), 'no tag, script link or image left');
      await page.locator('#toasts', { hasText: `Exported ${total} messages` }).waitFor();
      assert.deepEqual(pageErrors(page), []);
    });
  }
});
