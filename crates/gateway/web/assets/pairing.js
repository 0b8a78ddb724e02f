// "Pair another device": asks the gateway for a one-time pairing code (`pair.create`) and shows
// it as a QR code and a link in the `#ask` dialog. The code is good for one device, once, until
// it expires; the device that uses it gets a token of its own (see session.js).

import { $ } from './state.js';
import { request, toast } from './ui.js';
import { h } from './util.js';

export async function showPairDialog() {
  const res = await request('pair.create', {});
  if (!res || !res.payload || !res.payload.code) return;
  const { url, expires_at: expiresAt, qr_svg: svg } = res.payload;
  const dialog = $('ask');
  const minutes = Math.max(1, Math.round((expiresAt - Date.now()) / 60000));
  const link = h('input', { type: 'text', readonly: true, value: url, 'aria-label': 'Pairing link', class: 'pair-link' });
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(url);
      toast('Pairing link copied.');
    } catch {
      link.select();
    }
  };
  dialog.replaceChildren(
    h('h2', { id: 'ask-title' }, 'Pair another device'),
    h('p', {}, `Scan with the other device's camera or the Iris app, or open the link there. It works once, within ${minutes} minute${minutes === 1 ? '' : 's'}.`),
    svg ? h('img', { class: 'pair-qr', alt: 'Pairing QR code', src: `data:image/svg+xml;base64,${btoa(svg)}` }) : null,
    link,
    h('div', { class: 'dialog-actions' },
      h('button', { type: 'button', class: 'secondary', onclick: copy }, 'Copy link'),
      h('button', { type: 'button', class: 'primary', onclick: () => dialog.close('') }, 'Done')),
  );
  dialog.onclose = null;
  dialog.returnValue = '';
  dialog.showModal();
}
