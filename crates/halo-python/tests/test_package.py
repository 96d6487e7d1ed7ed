"""The installed package: an abi3 extension, typed, with stubs that match what it exports."""

import ast
import pathlib

import halo
import halo._halo

PACKAGE = pathlib.Path(halo.__file__).parent


def stub_tree() -> ast.Module:
    return ast.parse((PACKAGE / "__init__.pyi").read_text())


def public(name: str) -> bool:
    return not name.startswith("_")


def test_the_extension_is_built_for_the_stable_abi():
    # One wheel serves every CPython from 3.9 on.
    assert ".abi3." in pathlib.Path(halo._halo.__file__).name, halo._halo.__file__


def test_the_package_is_marked_typed_and_ships_its_stubs():
    assert (PACKAGE / "py.typed").is_file()
    assert (PACKAGE / "__init__.pyi").is_file()


def test_the_stubs_declare_every_export_and_nothing_that_is_missing():
    declared = {
        node.name
        for node in stub_tree().body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and public(node.name)
    }
    assert set(halo.__all__) <= declared, set(halo.__all__) - declared
    missing = {name for name in declared if not hasattr(halo, name)}
    assert not missing, f"stubs declare names the package lacks: {missing}"


def test_the_stubs_declare_only_methods_the_classes_have():
    for node in stub_tree().body:
        if not isinstance(node, ast.ClassDef):
            continue
        runtime = getattr(halo, node.name)
        for member in node.body:
            if isinstance(member, ast.FunctionDef) and public(member.name):
                assert hasattr(runtime, member.name), f"{node.name}.{member.name} is in the stubs only"
