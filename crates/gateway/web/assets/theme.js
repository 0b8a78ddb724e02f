// The theme (Settings › Theme): `localStorage` `iris.theme` is `light` or `dark`, absent for the
// system's. Applied as `<html data-theme="light|dark">`, which app.css reads, before the first
// paint: this is a classic script in <head>, so it runs before the body is parsed (the
// Content-Security-Policy allows no inline script). "System" follows the system's setting as it
// changes; a choice made in this tab (the `iris-theme` event) or in another tab (`storage`)
// applies at once.
(function theme() {
  var media = window.matchMedia('(prefers-color-scheme: dark)');
  function chosen() {
    try {
      var value = window.localStorage.getItem('iris.theme');
      return value === 'light' || value === 'dark' ? value : 'system';
    } catch (e) {
      return 'system';
    }
  }
  function apply() {
    var choice = chosen();
    var dark = choice === 'dark' || (choice === 'system' && media.matches);
    document.documentElement.dataset.theme = dark ? 'dark' : 'light';
    document.documentElement.dataset.themeChoice = choice;
  }
  apply();
  media.addEventListener('change', apply);
  document.addEventListener('iris-theme', apply);
  window.addEventListener('storage', function (ev) {
    if (ev.key === 'iris.theme' || ev.key === null) apply();
  });
}());
