//! The changes of a turn in Iris Web, at phone and desktop size, against the real gateway and its
//! demo agent (`edit` changes `<cwd>/notes.txt`: two lines added, one removed): the answer of a
//! turn whose tools changed files carries a line "1 file changed +2 −1", live and after a reload;
//! it opens a dialog listing each file under its path with its diff, side by side on a wide
//! screen (a button switches); an answer whose turn changed nothing has no such line. `revise`
//! changes notes.txt twice by whole texts and draft.txt twice by snippets: notes.txt shows one
//! diff from before the turn to after it, its edits folded under it; draft.txt shows its two.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, browserSuite, openSignedIn, pageErrors, send, shot, waitOnline,
} from './harness.mjs';

const suite = browserSuite(before, after);
const SIZES = [['phone', PHONE], ['desktop', DESKTOP]];

const assistant = (page, text) => page.locator('.msg.role-assistant:not(.streaming)', { hasText: text });

/** Opens the turn's changes from its answer's line; returns what the dialog lists. */
async function openChanges(page, answer, screenshot = null) {
  await answer.getByRole('button', { name: /file changed/ }).click();
  const dialog = page.getByRole('dialog', { name: /Changes of this turn/ });
  // Unified (coloured by highlight.js) or side by side, as the screen is wide.
  await dialog.locator('.change-diff code .hljs-addition, .split-diff .split-add', { hasText: 'four' }).first().waitFor();
  const shown = await dialog.evaluate((el) => ({
    title: el.querySelector('h2').textContent,
    files: [...el.querySelectorAll('.turn-file-head')].map((f) => f.textContent),
    diffs: el.querySelectorAll('.change-diff, .split-diff').length,
  }));
  if (screenshot) await shot(page, screenshot);
  await dialog.getByRole('button', { name: 'Close changes' }).click();
  await dialog.waitFor({ state: 'hidden' });
  return shown;
}

describe('the changes of a turn', { timeout: 240000 }, () => {
  for (const [size, viewport] of SIZES) {
    test(`an answer lists the files its turn changed, live and after a reload (${size})`, { timeout: 120000 }, async () => {
      const gw = await suite.gateway();
      const { page } = await suite.device(viewport);
      await openSignedIn(page, gw.url);
      await send(page, 'tool');
      const plain = assistant(page, 'Echo: tool');
      await plain.waitFor();
      await send(page, 'edit');
      const edited = assistant(page, 'Edited notes.txt.');
      await edited.waitFor();

      const line = edited.locator('.turn-changes');
      await line.waitFor();
      assert.equal((await line.textContent()).replace(/\s+/g, ' '), '1 file changed +2 \u22121');
      assert.equal(await plain.locator('.turn-changes').count(), 0, 'a turn that changed nothing has no line');
      const live = await openChanges(page, edited, `turn-changes-${size}`);
      assert.equal(live.title, 'Changes of this turn (1 file)');
      assert.equal(live.files.length, 1);
      assert.match(live.files[0], /\/notes\.txt \+2 \u22121$/);
      assert.equal(live.diffs, 1);

      await page.reload();
      await waitOnline(page);
      await edited.locator('.turn-changes').waitFor();
      assert.deepEqual(await openChanges(page, edited), live, 'the same after a reload');

      // Side by side on a wide screen (the old text left, the new right); a button switches.
      await edited.getByRole('button', { name: /file changed/ }).click();
      const dialog = page.getByRole('dialog', { name: /Changes of this turn/ });
      const layout = dialog.getByRole('button', { name: 'Side by side' });
      const wide = size === 'desktop';
      assert.equal(await layout.getAttribute('aria-pressed'), String(wide));
      if (!wide) await layout.click();
      const split = dialog.getByRole('region', { name: 'Diff of notes.txt, side by side' });
      await split.waitFor();
      const sides = await split.evaluate((el) => [...el.querySelectorAll('.split-row')].map((r) => [...r.children].map((c) => c.textContent)));
      assert.deepEqual(sides, [['1', 'one', '1', 'one'], ['2', 'two', '2', '2'], ['3', 'three', '3', 'three'], ['', '', '4', 'four']]);
      await shot(page, `turn-changes-split-${size}`);
      await dialog.getByRole('button', { name: 'Side by side' }).click();
      await dialog.getByRole('region', { name: 'Diff of notes.txt' }).waitFor();
      assert.equal(await dialog.locator('.split-diff').count(), 0, 'unified again');
      assert.equal(await plain.locator('.turn-changes').count(), 0);
      assert.deepEqual(pageErrors(page), []);
    });
  }

  test('a file edited twice in a turn shows one diff from before to after, its edits folded under it', { timeout: 120000 }, async () => {
    const gw = await suite.gateway();
    const { page } = await suite.device(PHONE);
    await openSignedIn(page, gw.url);
    await send(page, 'revise');
    const revised = assistant(page, 'Revised notes.txt and draft.txt.');
    await revised.locator('.turn-changes').waitFor();
    assert.equal((await revised.locator('.turn-changes').textContent()).replace(/\s+/g, ' '), '2 files changed +4 \u22123');
    const read = async (screenshot = null) => {
      await revised.getByRole('button', { name: /files changed/ }).click();
      const dialog = page.getByRole('dialog', { name: /Changes of this turn/ });
      await dialog.locator('.turn-file').first().waitFor();
      const shown = await dialog.evaluate((el) => [...el.querySelectorAll('.turn-file')].map((f) => ({
        head: f.querySelector('.turn-file-head').textContent,
        hints: [...f.querySelectorAll(':scope > div > .settings-hint, :scope > details > div > .settings-hint')].map((x) => x.textContent),
        folded: [...f.querySelectorAll(':scope > details')].map((d) => [d.open, d.querySelector('summary').textContent, d.querySelectorAll('.change-diff').length]),
        shownDiff: f.querySelector(':scope > div .change-diff')?.textContent ?? '',
      })));
      if (screenshot) await shot(page, screenshot);
      await dialog.getByRole('button', { name: 'Close changes' }).click();
      await dialog.waitFor({ state: 'hidden' });
      return shown;
    };
    const live = await read('turn-changes-combined-phone');
    assert.equal(live.length, 2, JSON.stringify(live));
    const [notes, draft] = live;
    assert.match(notes.head, /\/notes\.txt \+2 \u22121$/);
    assert.deepEqual(notes.hints, ['2 edits combined: from before the turn to after it', 'Edit 1 of 2', 'Edit 2 of 2']);
    assert.deepEqual(notes.folded, [[false, 'Each edit (2)', 2]]);
    assert.match(notes.shownDiff, /-two\n\+2\n three\n\+four/);
    assert.match(draft.head, /\/draft\.txt \+2 \u22122$/);
    assert.deepEqual(draft.hints, ['Edit 1 of 2', 'Edit 2 of 2'], 'snippets do not combine');
    assert.deepEqual(draft.folded, []);

    await page.reload();
    await waitOnline(page);
    await revised.locator('.turn-changes').waitFor();
    assert.deepEqual(await read(), live, 'the same after a reload');
    assert.deepEqual(pageErrors(page), []);
  });
});
