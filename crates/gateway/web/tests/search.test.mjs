// Search in Iris Web, at phone and desktop size, against the real gateway: a search the gateway
// refuses (here its per-device rate) clears the hits of the query before and says why, instead of
// leaving them under the new query.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, browserSuite, openSignedIn, pageErrors, send, shot,
} from './harness.mjs';

const suite = browserSuite(before, after);
const SIZES = [['phone', PHONE], ['desktop', DESKTOP]];

describe('search', { timeout: 300000 }, () => {
  for (const [size, viewport] of SIZES) {
    test(`a refused search clears the earlier hits and says why (${size})`, { timeout: 120000 }, async () => {
      const gw = await suite.gateway({ agent: 'none', config: '[limits]\nsearches_per_minute = 2\n' });
      const { page } = await suite.device(viewport);
      await openSignedIn(page, gw.url);
      await send(page, 'apples and pears');
      await send(page, 'plums and cherries');
      await page.locator('.msg.role-user', { hasText: 'plums' }).waitFor();

      await page.getByRole('button', { name: 'Search messages' }).click();
      const box = page.getByRole('searchbox', { name: 'Search messages' });
      const results = page.locator('#search-results');
      const searchFor = async (query) => { await box.fill(query); await box.press('Enter'); };

      await searchFor('apples');
      await results.locator('.hit', { hasText: 'apples' }).waitFor();
      await searchFor('plums');
      await results.locator('.hit', { hasText: 'plums' }).waitFor();
      assert.equal(await results.locator('.hit').count(), 1, 'only the hits of the query shown');

      // The third search in a minute is refused: the hits of "plums" go, and the list says why.
      await searchFor('cherries');
      const refusal = results.getByRole('alert');
      await refusal.waitFor();
      assert.match(await refusal.textContent(), /cherries.*more than 2 searches in a minute; try again in \d+ s/);
      assert.equal(await results.locator('.hit').count(), 0, 'no hits of an earlier query under the refused one');
      await shot(page, `search-refused-${size}`);
      assert.deepEqual(pageErrors(page), []);
    });
  }
});
