"""The explorer's result views are built when first needed, not at start-up, and a view
built late sits in its own tab with that tab's title and state."""

from gradviz.gui.pages.explorer.result_views import VIEW_CLASSES, VIEW_TITLES, ResultViews


def test_no_view_is_built_until_its_tab_is_shown_or_it_is_asked_for(qtbot):
    tabs = ResultViews()
    qtbot.addWidget(tabs)
    assert tabs.views.built() == []  # the window's start-up builds none of them
    tabs.resize(800, 500)
    tabs.show()
    qtbot.waitExposed(tabs)
    assert tabs.views.built() == ["sample"]  # the tab on screen
    tabs.setCurrentIndex(list(VIEW_CLASSES).index("field"))
    assert tabs.views.built() == ["sample", "field"]
    assert tabs.currentWidget() is tabs.views["field"]
    full = tabs.views["full"]  # asked for by key: built and put in its own tab
    assert tabs.indexOf(full) == list(VIEW_CLASSES).index("full")
    assert [tabs.tabText(k) for k in range(tabs.count())] == list(VIEW_TITLES.values())
    assert tabs.currentWidget() is tabs.views["field"]  # building another moved nothing


def test_a_disabled_tab_stays_disabled_when_its_view_is_built(qtbot):
    tabs = ResultViews()
    qtbot.addWidget(tabs)
    tabs._enable_only("saliency_map")  # what a too-big Jacobian leaves (show_saliency)
    assert tabs.views.built() == []  # enabling tabs builds no view
    view = tabs.views["sample"]
    index = tabs.indexOf(view)
    assert index == 0 and not tabs.isTabEnabled(index)
    assert tabs.currentIndex() == list(VIEW_CLASSES).index("saliency_map")
