// Wide content in an answer, at phone and desktop size, against the real gateway and its demo
// agent: a Markdown table wider than the screen keeps its words whole and scrolls sideways in its
// own box, and a code block with a long line is reachable and scrollable by keyboard.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, browserSuite, openSignedIn, pageErrors, send, shot,
} from './harness.mjs';

const suite = browserSuite(before, after);
const SIZES = [['phone', PHONE], ['desktop', DESKTOP]];

const WORDS = ['configuration', 'internationalization', 'responsibilities', 'acknowledgement', 'troubleshooting', 'authentication'];
const TABLE = [
  `| ${WORDS.map((w, i) => `Column ${i + 1}`).join(' | ')} |`,
  `|${WORDS.map(() => '---').join('|')}|`,
  ...[1, 2, 3].map((r) => `| ${WORDS.map((w) => `${w} ${r}`).join(' | ')} |`),
].join('\n');
const CODE = `\`\`\`rust\nfn main() { let message = "${'a long line of code '.repeat(12)}"; println!("{message}"); }\n\`\`\``;

describe('wide content', { timeout: 300000 }, () => {
  for (const [size, viewport] of SIZES) {
    test(`a wide table scrolls in its own box with whole words; a code block is reachable by keyboard (${size})`, { timeout: 120000 }, async () => {
      const gw = await suite.gateway();
      const { page } = await suite.device(viewport);
      await openSignedIn(page, gw.url);
      await send(page, `wide\n\n${TABLE}\n\n${CODE}`);
      const answer = page.locator('.msg.role-assistant:not(.streaming)', { hasText: 'Echo: wide' });
      await answer.waitFor();

      // The table: no word of a cell is broken over two lines.
      const box = answer.getByRole('region', { name: 'Table' });
      const broken = await box.evaluate((el) => {
        const out = [];
        for (const cell of el.querySelectorAll('th, td')) {
          const node = cell.firstChild;
          if (!node || node.nodeType !== 3) continue;
          let at = 0;
          for (const word of node.data.split(' ')) {
            const range = document.createRange();
            range.setStart(node, at);
            range.setEnd(node, at + word.length);
            if (range.getClientRects().length > 1) out.push(word);
            at += word.length + 1;
          }
        }
        return out;
      });
      assert.deepEqual(broken, [], 'no word broken mid-word');
      const widest = await box.locator('td').evaluateAll((tds) => Math.min(...tds.map((td) => td.getBoundingClientRect().width)));
      assert.ok(widest > 60, `cells are not squeezed to a few letters (narrowest ${widest}px)`);

      // Wider than the answer at phone size: the table's box scrolls, not the page.
      const sizes = await box.evaluate((el) => ({ scroll: el.scrollWidth, client: el.clientWidth, page: document.documentElement.scrollWidth }));
      assert.ok(sizes.page <= viewport.width, `the page does not scroll sideways (${sizes.page})`);
      if (viewport === PHONE) {
        assert.ok(sizes.scroll > sizes.client, `the table's box scrolls (${sizes.scroll} > ${sizes.client})`);
        await box.focus();
        await page.keyboard.press('ArrowRight');
        await page.keyboard.press('ArrowRight');
        await page.waitForFunction((el) => el.scrollLeft > 0, await box.elementHandle());
        await box.evaluate((el) => { el.scrollLeft = 0; });
      }
      assert.equal(await box.getAttribute('tabindex'), '0');

      // The code block: focusable with a name, and the keyboard scrolls its long line.
      const code = answer.getByRole('region', { name: 'Code, rust' });
      assert.equal(await code.evaluate((el) => el.tagName), 'PRE');
      assert.equal(await code.getAttribute('tabindex'), '0');
      const overflow = await code.evaluate((el) => el.scrollWidth > el.clientWidth);
      assert.ok(overflow, 'the long line overflows its block');
      await code.focus();
      assert.ok(await code.evaluate((el) => el === document.activeElement));
      await page.keyboard.press('ArrowRight');
      await page.keyboard.press('ArrowRight');
      await page.waitForFunction((el) => el.scrollLeft > 0, await code.elementHandle());
      await code.evaluate((el) => { el.scrollLeft = 0; });
      await answer.scrollIntoViewIfNeeded();
      await shot(page, `wide-table-${size}`);
      assert.deepEqual(pageErrors(page), []);
    });
  }
});
