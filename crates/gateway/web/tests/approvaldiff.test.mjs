//! An approval's file changes in Iris Web, at phone and desktop size, against the real gateway and
//! its demo agent (`patch` asks to change `<cwd>/notes.txt`: "beta" becomes "BETA", and only the
//! permission request carries the diff): the approval's dialog shows the file's name, its counts
//! and the coloured diff above its choices, before anything is answered; allowed, the answer comes,
//! and the lane's card of the approval keeps the diff, live and (drawn from the answer's steps)
//! after a reload. The page never widens on a phone.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, browserSuite, openSignedIn, pageErrors, send, shot, waitOnline,
} from './harness.mjs';

const suite = browserSuite(before, after);
const SIZES = [['phone', PHONE], ['desktop', DESKTOP]];

const assistant = (page, text) => page.locator('.msg.role-assistant:not(.streaming)', { hasText: text });
const picker = (page) => page.locator('dialog#picker[open]');
const doneCard = (page) => page.locator('.picker-card.done', { has: page.locator('.change') });

/** Waits until the changes inside `box` are drawn and coloured, and reads what they show. */
async function readChanges(box) {
  await box.locator('.change-diff code .hljs-addition', { hasText: '+BETA' }).waitFor();
  return box.evaluate((el) => {
    const texts = (sel) => [...el.querySelectorAll(sel)].map((s) => s.textContent);
    const pre = el.querySelector('.change-diff');
    return {
      changes: el.querySelectorAll('.change').length,
      file: el.querySelector('.change-file').textContent,
      title: el.querySelector('.change-file').title,
      counts: el.querySelector('.change-counts').textContent,
      countsLabel: el.querySelector('.change-counts').getAttribute('aria-label'),
      added: texts('.change-diff .hljs-addition'),
      deleted: texts('.change-diff .hljs-deletion'),
      label: pre.getAttribute('aria-label'),
      right: el.querySelector('.change').getBoundingClientRect().right,
    };
  });
}

function assertChanges(got, viewport, where) {
  assert.equal(got.changes, 1, where);
  assert.equal(got.file, 'notes.txt', where);
  assert.match(got.title, /\/notes\.txt$/, where);
  assert.equal(got.counts, '+1 \u22121', where);
  assert.equal(got.countsLabel, '1 line added, 1 removed', where);
  assert.ok(got.deleted.includes('-beta'), `${where}: ${got.deleted}`);
  assert.ok(got.added.includes('+BETA'), `${where}: ${got.added}`);
  assert.equal(got.label, 'Diff of notes.txt', where);
  assert.ok(got.right <= viewport.width, `${where}: the changes fit the screen (${got.right})`);
}

/** The page is no wider than the screen. */
async function assertNoSideways(page, where) {
  const { scroll, inner } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
  assert.ok(scroll <= inner, `${where}: the page scrolls sideways (${scroll} > ${inner})`);
}

describe('file changes in approvals', { timeout: 300000 }, () => {
  for (const [size, viewport] of SIZES) {
    test(`an approval shows its diff before Allow, and its card keeps it live and after a reload (${size})`, { timeout: 120000 }, async () => {
      const gw = await suite.gateway();
      const { page } = await suite.device(viewport);
      await openSignedIn(page, gw.url);

      await send(page, 'patch');
      const dialog = picker(page);
      await dialog.getByRole('button', { name: 'Allow once' }).waitFor();
      const box = dialog.locator('.picker-changes');
      assertChanges(await readChanges(box), viewport, `${size}, the dialog`);
      // The diff comes above the choices, and nothing is answered yet.
      const order = await dialog.evaluate((el) => {
        const changes = el.querySelector('.picker-changes');
        const choices = el.querySelector('.choices');
        return Boolean(changes.compareDocumentPosition(choices) & Node.DOCUMENT_POSITION_FOLLOWING);
      });
      assert.equal(order, true, 'the changes come before the choices');
      assert.equal(await assistant(page, 'Patched notes.txt.').count(), 0, 'not answered yet');
      // The request's own text, which repeats the diff, waits behind a summary.
      assert.equal(await dialog.locator('details.preview-more:not([open]) pre.preview').count(), 1);
      if (viewport === PHONE) await assertNoSideways(page, 'the dialog');
      await shot(page, `approvaldiff-dialog-${size}`);

      await dialog.getByRole('button', { name: 'Allow once' }).click();
      await assistant(page, 'Patched notes.txt.').waitFor();
      assert.equal(await picker(page).count(), 0, 'the dialog closed');
      const live = doneCard(page);
      await live.filter({ hasText: 'you chose Allow once' }).waitFor();
      assertChanges(await readChanges(live), viewport, `${size}, the lane's card after the answer`);
      if (viewport === PHONE) await assertNoSideways(page, 'after the answer');
      await shot(page, `approvaldiff-answered-${size}`);

      await page.reload();
      await waitOnline(page);
      await assistant(page, 'Patched notes.txt.').waitFor();
      const step = doneCard(page);
      await step.filter({ hasText: 'you chose Allow once' }).waitFor();
      assertChanges(await readChanges(step), viewport, `${size}, the answer's step after a reload`);
      assert.match(await step.getAttribute('data-id'), /^step:/, 'drawn from the answer\'s steps');
      if (viewport === PHONE) await assertNoSideways(page, 'after a reload');
      await shot(page, `approvaldiff-reloaded-${size}`);

      assert.deepEqual(pageErrors(page), []);
    });
  }
});
