"""`lazyphi.set_logging_level` sets the 'lazyphi' logger's level, as phiml's sets its own logger's."""

import logging

import pytest

import lazyphi


@pytest.mark.parametrize('level', ['debug', 'INFO', 'warning', 'error', 'critical'])
def test_the_lazyphi_logger_takes_the_level(level):
    logger = logging.getLogger('lazyphi')
    before = logger.level
    try:
        lazyphi.set_logging_level(level)
        assert logger.level == logging.getLevelName(level.upper())
        assert logging.getLogger('lazyphi.cli').getEffectiveLevel() == logger.level  # its modules' loggers follow
    finally:
        logger.setLevel(before)


def test_the_default_is_debug_and_bad_levels_raise():
    logger = logging.getLogger('lazyphi')
    before = logger.level
    try:
        lazyphi.set_logging_level()
        assert logger.level == logging.DEBUG
    finally:
        logger.setLevel(before)
    with pytest.raises(ValueError, match='verbose'):
        lazyphi.set_logging_level('verbose')


def test_phiml_has_it_at_the_top_level_too():
    phiml = pytest.importorskip('phiml')
    assert callable(phiml.set_logging_level)
