"""A page's form as a browser would post it: what tests post to the real admin views, so that
a hidden field, an inline's management form or a prefilled value the page renders is
posted as the page gave it (Django's test Client only posts what it is given)."""

from html.parser import HTMLParser


class _FormReader(HTMLParser):
    def __init__(self, form_id: str) -> None:
        super().__init__(convert_charrefs=True)
        self.form_id = form_id
        self.inside = False
        self.data: dict[str, list[str]] = {}
        self._select: str | None = None
        self._select_first: str | None = None
        self._select_chosen = False
        self._textarea: str | None = None
        self._textarea_started = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.inside = a.get("id") == self.form_id
        if not self.inside or "disabled" in a:
            return
        name = a.get("name", "")
        if tag == "input" and name:
            kind = a.get("type", "text")
            if kind in ("submit", "button", "image", "file"):
                return
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    self.data.setdefault(name, []).append(a.get("value", "on"))
                return
            self.data.setdefault(name, []).append(a.get("value", ""))
        elif tag == "select" and name:
            self._select, self._select_first, self._select_chosen = name, None, False
        elif tag == "option" and self._select:
            value = a.get("value", "")
            if self._select_first is None:
                self._select_first = value
            if "selected" in a:
                self.data.setdefault(self._select, []).append(value)
                self._select_chosen = True
        elif tag == "textarea" and name:
            self._textarea, self._textarea_started = name, False
            self.data[name] = [""]

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "select" and self._select:
            if not self._select_chosen and self._select_first is not None:
                self.data[self._select] = [self._select_first]  # a browser posts the first
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea:
            if not self._textarea_started:  # its first newline is markup (HTML spec)
                data, self._textarea_started = data.removeprefix("\n"), True
            self.data[self._textarea][0] += data


def form_data(html: str, form_id: str) -> dict[str, str | list[str]]:
    """The fields of the form `form_id` in `html` with the values a browser would post."""
    reader = _FormReader(form_id)
    reader.feed(html)
    if not reader.data:
        raise AssertionError(f"no form with id {form_id!r} (or it has no fields)")
    return {k: v[0] if len(v) == 1 else v for k, v in reader.data.items()}
