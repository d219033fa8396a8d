"""Sphinx glue for the irbook site.

nbdev's `show_doc` output (our API reference) is Markdown that opens with a horizontal rule. Inside a
notebook output docutils cannot place a transition and aborts the build, so rules that do not sit directly
under a section or the document are dropped before docutils checks them."""
from docutils import nodes
from docutils.transforms import Transform


class DropNestedTransitions(Transform):
    default_priority = 800  # before docutils' misc.Transitions (830)

    def apply(self, **kwargs):
        for node in list(self.document.findall(nodes.transition)):
            if not isinstance(node.parent, (nodes.document, nodes.section)):
                node.parent.remove(node)


def setup(app):
    app.add_transform(DropNestedTransitions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
