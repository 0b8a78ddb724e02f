// What the Notifications dialog says about this device's pushes, in plain words: the backend
// pushes go through (`push.status` `route`) and how the last push through each backend ended
// (`last`, docs/protocol.md §10). Pure functions of the status and the time, no DOM.

const BACKENDS = { webpush: 'Web Push (this browser)', fcm: 'Firebase Cloud Messaging', ntfy: 'ntfy' };

/** A backend's name for people. */
export function backendName(backend) {
  return BACKENDS[backend] || String(backend);
}

/** Which backend pushes take, or why none can. */
export function routeText(route) {
  return route ? backendName(route) : "None: notifications can't reach this device.";
}

/** How long ago `at` (unix ms) was, seen at `now`: "just now", "2 minutes ago", "3 days ago". */
export function ago(at, now) {
  const seconds = Math.max(0, Math.round((now - at) / 1000));
  if (seconds < 45) return 'just now';
  const plural = (n, unit) => `${n} ${unit}${n === 1 ? '' : 's'} ago`;
  const minutes = Math.max(1, Math.round(seconds / 60));
  if (minutes < 60) return plural(minutes, 'minute');
  const hours = Math.round(minutes / 60);
  if (hours < 24) return plural(hours, 'hour');
  return plural(Math.round(hours / 24), 'day');
}

/** How one push ended (`{backend, result, detail?, at}`), as a sentence. */
export function outcomeText(outcome, now) {
  const when = ago(Number(outcome.at) || now, now);
  const detail = outcome.detail ? `: ${outcome.detail}` : '';
  switch (outcome.result) {
    case 'delivered':
      return `Delivered ${when}`;
    case 'retrying':
      return `Retrying${detail} (${when})`;
    case 'rejected':
      return `Refused${detail} (${when})`;
    case 'expired':
      return outcome.backend === 'webpush'
        ? `Expired ${when} — this browser's subscription was removed. Turn notifications on again.`
        : `Expired ${when} — this device's registration was removed. Register it again in the Iris app.`;
    case 'unreachable':
      return `Gave up after retries (${when})`;
    default:
      return `${outcome.result}${detail} (${when})`;
  }
}
