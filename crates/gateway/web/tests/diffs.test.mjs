//! A tool call's file changes in Iris Web, at phone and desktop size, against the real gateway and
//! its demo agent (`edit` changes `<cwd>/notes.txt`: two lines added, one removed): the tool card
//! shows the file's name with its counts and the diff coloured by highlight.js, on the device that
//! asked and on a second one, live and after a reload; the diff scrolls sideways inside its own
//! box (reachable by keyboard) so that the page never widens on a phone; a long diff is collapsed
//! behind "Show all N lines", and a cut diff says so.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, browserSuite, openSignedIn, pageErrors, send, shot, waitOnline,
} from './harness.mjs';

const suite = browserSuite(before, after);
const SIZES = [['phone', PHONE], ['desktop', DESKTOP]];
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

const assistant = (page, text) => page.locator('.msg.role-assistant:not(.streaming)', { hasText: text });
const editCard = (page) => page.locator('details.tool', { has: page.locator('.change') });

/** Waits until the edit's card is drawn and coloured, and reads what it shows. */
async function readCard(page) {
  const card = editCard(page);
  await card.locator('.change-diff code .hljs-addition', { hasText: '+four' }).waitFor();
  return card.evaluate((el) => {
    const texts = (sel) => [...el.querySelectorAll(sel)].map((s) => s.textContent);
    const pre = el.querySelector('.change-diff');
    return {
      open: el.open,
      changes: el.querySelectorAll('.change').length,
      file: el.querySelector('.change-file').textContent,
      title: el.querySelector('.change-file').title,
      counts: el.querySelector('.change-counts').textContent,
      countsLabel: el.querySelector('.change-counts').getAttribute('aria-label'),
      added: texts('.change-diff .hljs-addition'),
      deleted: texts('.change-diff .hljs-deletion'),
      foreign: [...el.querySelectorAll('.change-diff code *')].filter((n) => n.tagName !== 'SPAN' || ![...n.classList].every((c) => c.startsWith('hljs-'))).length,
      tabIndex: pre.tabIndex,
      label: pre.getAttribute('aria-label'),
      overflowX: getComputedStyle(pre).overflowX,
      right: el.getBoundingClientRect().right,
      more: el.querySelectorAll('.change-more').length,
    };
  });
}

function assertCard(card, viewport, where) {
  assert.equal(card.open, true, `${where}: the card is open`);
  assert.equal(card.changes, 1, where);
  assert.equal(card.file, 'notes.txt', where);
  assert.match(card.title, /\/notes\.txt$/, where);
  assert.equal(card.counts, '+2 \u22121', where);
  assert.equal(card.countsLabel, '2 lines added, 1 removed', where);
  assert.ok(card.deleted.includes('-two'), `${where}: ${card.deleted}`);
  assert.ok(card.added.includes('+2') && card.added.includes('+four'), `${where}: ${card.added}`);
  assert.equal(card.foreign, 0, `${where}: only highlight.js spans in the code`);
  assert.equal(card.tabIndex, 0, `${where}: the diff is reachable by keyboard`);
  assert.equal(card.label, 'Diff of notes.txt', where);
  assert.equal(card.overflowX, 'auto', where);
  assert.ok(card.right <= viewport.width, `${where}: the card fits the screen (${card.right})`);
  assert.equal(card.more, 0, `${where}: a short diff is shown whole`);
}

/** The page is no wider than the screen. */
async function assertNoSideways(page, where) {
  const { scroll, inner } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
  assert.ok(scroll <= inner, `${where}: the page scrolls sideways (${scroll} > ${inner})`);
}

/** Serious and critical axe-core violations inside the edit's card. */
async function axeOnCard(page) {
  await page.evaluate(AXE);
  const result = await page.evaluate(() => window.axe.run({ include: [['details.tool.ok']] }, { resultTypes: ['violations'] }));
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id}: ${v.help} — ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | ')}`);
}

describe('file changes in tool cards', { timeout: 400000 }, () => {
  for (const [size, viewport] of SIZES) {
    test(`an edit shows its file, counts and coloured diff on both devices, live and after a reload (${size})`, { timeout: 120000 }, async () => {
      const gw = await suite.gateway();
      const { page } = await suite.device(viewport);
      const other = await suite.device(DESKTOP);
      await openSignedIn(page, gw.url);
      await openSignedIn(other.page, gw.url);

      await send(page, 'edit');
      await assistant(page, 'Edited notes.txt').waitFor();
      assertCard(await readCard(page), viewport, `${size}, live`);
      assertCard(await readCard(other.page), DESKTOP, 'the other device, live');
      if (viewport === PHONE) await assertNoSideways(page, 'live');

      // The diff block takes the keyboard's focus, so its long lines can be scrolled.
      await editCard(page).locator('.change-diff').focus();
      assert.equal(await page.evaluate(() => document.activeElement.getAttribute('aria-label')), 'Diff of notes.txt');
      assert.deepEqual(await axeOnCard(page), [], 'axe-core on the card');
      await shot(page, `diff-live-${size}`);

      await page.reload();
      await waitOnline(page);
      await assistant(page, 'Edited notes.txt').waitFor();
      assertCard(await readCard(page), viewport, `${size}, after a reload`);
      if (viewport === PHONE) await assertNoSideways(page, 'after a reload');
      await shot(page, `diff-reloaded-${size}`);

      await other.page.reload();
      await waitOnline(other.page);
      assertCard(await readCard(other.page), DESKTOP, 'the other device, after a reload');

      assert.deepEqual(pageErrors(page), []);
      assert.deepEqual(pageErrors(other.page), []);
    });
  }

  test('a long diff is collapsed behind "Show all N lines", and a cut or dropped diff says so (phone)', { timeout: 60000 }, async () => {
    const gw = await suite.gateway();
    const { page } = await suite.device(PHONE);
    await openSignedIn(page, gw.url);
    // The card drawn by the page's own module, as from an answer's steps, in the shown lane.
    await page.evaluate(async () => {
      const { stepCards } = await import('./assets/steps.js');
      const body = Array.from({ length: 30 }, (_, i) => `+line ${i + 1} ${'x'.repeat(i === 3 ? 300 : 10)}`);
      const diff = ['--- /w/long.txt', '+++ /w/long.txt', '@@ -0,0 +1,30 @@', ...body, ''].join('\n');
      const steps = [{
        kind: 'tool', name: 'edit', ok: true,
        changes: [
          { path: '/w/long.txt', diff, added: 30, removed: 0, new_file: true, truncated: true },
          { path: '/w/huge.bin', diff: '', added: 90000, removed: 1, truncated: true },
        ],
      }];
      const [[, card]] = stepCards('m-test', steps, null);
      document.querySelector('#log .lane').append(card);
    });
    const card = page.locator('details.tool', { has: page.locator('.change[data-path="/w/long.txt"]') });
    const long = card.locator('.change[data-path="/w/long.txt"]');
    const more = long.getByRole('button', { name: 'Show all 31 lines' });
    await more.waitFor();
    await long.locator('.hljs-addition', { hasText: '+line 11 ' }).waitFor();
    assert.equal(await long.locator('.hljs-addition', { hasText: '+line 12 ' }).count(), 0, 'the 12th line waits behind the button');
    assert.equal(await long.locator('.change-new').textContent(), 'new file');
    assert.equal(await long.locator('.change-note').textContent(), 'Diff cut short');
    await long.locator('.change-diff').evaluate((pre) => pre.scrollIntoView());
    await assertNoSideways(page, 'a long line');
    await shot(page, 'diff-collapsed-phone');

    await more.click();
    await long.locator('.hljs-addition', { hasText: '+line 30 ' }).waitFor();
    assert.equal(await more.count(), 0);
    assert.equal(await page.evaluate(() => document.activeElement.getAttribute('aria-label')), 'Diff of long.txt', 'the focus goes to the diff');
    const scroll = await long.locator('.change-diff').evaluate((pre) => ({ scroll: pre.scrollWidth, client: pre.clientWidth }));
    assert.ok(scroll.scroll > scroll.client, 'the long line scrolls inside the diff');
    await page.keyboard.press('ArrowRight');
    await page.waitForFunction(() => document.activeElement.scrollLeft > 0, null, { timeout: 5000 });
    await assertNoSideways(page, 'the whole diff');

    const huge = card.locator('.change[data-path="/w/huge.bin"]');
    assert.equal(await huge.locator('.change-counts').getAttribute('aria-label'), '90000 lines added, 1 removed');
    assert.equal(await huge.locator('.change-note').textContent(), 'Too large to show');
    assert.equal(await huge.locator('.change-diff').count(), 0);
    await shot(page, 'diff-expanded-phone');
    assert.deepEqual(pageErrors(page), []);
  });
});
